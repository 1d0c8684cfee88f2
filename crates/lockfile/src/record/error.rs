//! Why some bytes are not a lock document.

use super::read::MAX_RECORD_BYTES;

/// Why some bytes are not a lock document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The file is empty or holds only whitespace.
    #[error("the file is empty")]
    Empty,
    /// The file is longer than any record this crate writes, so it is not
    /// ours, whatever its first bytes are (zeros and whitespace included):
    /// [`Content::Foreign`](crate::inspect::Content::Foreign), never written,
    /// truncated or removed.
    #[error("the file holds {0} bytes or more, more than any owner record (at most {max}): not ours", max = MAX_RECORD_BYTES)]
    TooLarge(usize),
    /// The content begins as this crate writes every record but is not a
    /// whole one: torn, truncated, or zero-filled by a crash. Ours to
    /// overwrite ([`Content::Torn`](crate::inspect::Content::Torn)).
    #[error("the content is not an owner record: {0}")]
    Malformed(String),
    /// The content is not ours: some other tool's file (a script, a
    /// `Cargo.lock`, a PID file, JSON of another shape). Acquire never
    /// writes into it and `reap` leaves it alone ([`Content::Foreign`](crate::inspect::Content::Foreign)).
    #[error("the content is not an owner record of ours (another tool's file?)")]
    Foreign,
}

impl DecodeError {
    /// Reads back the sentence a report writes for this error (its
    /// `Display`, the JSON `content_error`). A sentence of a later version
    /// reads as [`DecodeError::Malformed`] carrying it whole.
    pub fn from_sentence(sentence: &str) -> DecodeError {
        const MALFORMED: &str = "the content is not an owner record: ";
        if sentence == DecodeError::Empty.to_string() {
            return DecodeError::Empty;
        }
        if sentence == DecodeError::Foreign.to_string() {
            return DecodeError::Foreign;
        }
        if let Some(detail) = sentence.strip_prefix(MALFORMED) {
            return DecodeError::Malformed(detail.to_owned());
        }
        let size = sentence
            .strip_prefix("the file holds ")
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(n, _)| n.parse().ok());
        match size {
            Some(n) if DecodeError::TooLarge(n).to_string() == sentence => DecodeError::TooLarge(n),
            _ => DecodeError::Malformed(sentence.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sentence_reads_back_as_its_error() {
        for error in [
            DecodeError::Empty,
            DecodeError::TooLarge(65_537),
            DecodeError::Malformed("EOF while parsing an object at line 1 column 9".into()),
            DecodeError::Foreign,
        ] {
            assert_eq!(DecodeError::from_sentence(&error.to_string()), error);
        }
        assert_eq!(
            DecodeError::from_sentence("a reason of a later version"),
            DecodeError::Malformed("a reason of a later version".into())
        );
    }
}
