//! The engine's `tracing` events, as a test sees them: every event of the
//! test binary (each lease runs on a thread of its own, so a subscriber for
//! one thread would miss them), kept with its fields as text. Tests run in
//! parallel: each picks its own by the key of its lease.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// One event: its `event` field (or its name) and every field as text.
#[derive(Clone, Debug)]
pub struct Captured {
    pub event: String,
    pub fields: BTreeMap<String, String>,
}

impl Captured {
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

static EVENTS: Mutex<Vec<Captured>> = Mutex::new(Vec::new());

struct Capture;

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let name = fields
            .0
            .get("event")
            .cloned()
            .unwrap_or_else(|| event.metadata().name().to_owned());
        EVENTS.lock().unwrap().push(Captured {
            event: name,
            fields: fields.0,
        });
    }
}

/// Starts capturing (once per test binary).
pub fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
            .expect("the only subscriber");
    });
}

/// The events named `event` about `key`, so far.
pub fn of(key: &str, event: &str) -> Vec<Captured> {
    EVENTS
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.event == event && e.field("key") == key)
        .cloned()
        .collect()
}

/// Waits up to `limit` for at least `count` events named `event` about
/// `key`; true if they came.
pub fn wait_for(key: &str, event: &str, count: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if of(key, event).len() >= count {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
