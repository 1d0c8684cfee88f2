#!/usr/bin/env python3
"""Lists the import graph of each crate of the workspace and fails on a circle.

Two graphs per crate, both built from the source alone (no compiler):

- files: an edge A -> B when code in file A names an item defined in file B,
  through a `use` or a path in code (`crate::x::f`, `super::T`, `child::g`,
  or a path through a name that a `use` brought in). A re-export is followed
  to the file that defines the item, so that a module's `mod.rs` that only
  gathers its children is not a node every child depends on; the file that
  re-exports depends on what it re-exports.
- modules: the same edges between the crate's top-level modules
  (`crate::acquire`, `crate::guard`, ...), a file's module being the first
  component of its module path; the crate root is left out.

Test code is left out: a module or item under `#[cfg(test)]` (a test sits
beside what it tests and may use anything). Comments, strings and doc links
never count.

Usage:
    scripts/import-cycles.py [--edges] [--tests] [--crate NAME] [WORKSPACE]

Exits 1 when any graph has a circle, naming each strongly connected set of
files or modules; 0 otherwise. `--edges` also prints every edge.
"""

import argparse
import pathlib
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

KEYWORDS_DEF = {"fn", "struct", "enum", "union", "trait", "type", "const", "static"}
PATH_ROOTS = {"crate", "super", "self"}


# --- tokens ---------------------------------------------------------------

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A raw or byte string's opening: r"", r#""#, b"", br"", br#""#.
PREFIXED = re.compile(r'(br|r|b)(#*)"')


def tokenize(text):
    """Rust tokens, enough for paths: identifiers, `::`, punctuation, and
    string literals as ("str", value). Comments are dropped."""
    tokens = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif PREFIXED.match(text, i):
            m = PREFIXED.match(text, i)
            if "r" in m.group(1):  # a raw string: no escapes
                close = '"' + m.group(2)
                j = text.find(close, m.end())
                j = n if j < 0 else j
                tokens.append(("str", text[m.end():j]))
                i = j + len(close)
            else:  # b"..."
                i = read_string(text, m.end() - 1, tokens)
        elif text.startswith("b'", i):
            i = skip_char(text, i + 1)
        elif c == '"':
            i = read_string(text, i, tokens)
        elif c == "'":
            if text.startswith("\\", i + 1) or (i + 2 < n and text[i + 2] == "'"):
                i = skip_char(text, i)
            else:  # a lifetime or a label
                i += 1
                m = IDENT.match(text, i)
                if m:
                    i = m.end()
        elif c.isalpha() or c == "_":
            m = IDENT.match(text, i)
            tokens.append(m.group(0))
            i = m.end()
        elif c.isdigit():
            m = re.compile(r"[0-9][0-9A-Za-z_.]*").match(text, i)
            i = m.end()
        elif text.startswith("::", i):
            tokens.append("::")
            i += 2
        else:
            tokens.append(c)
            i += 1
    return tokens


def skip_char(text, i):
    """The index past the character literal whose quote is at `i`."""
    if text.startswith("\\", i + 1):
        j = i + 3  # past the escaped character
        while j < len(text) and text[j] != "'":
            j += 1
        return j + 1
    return i + 3


def read_string(text, i, tokens):
    """Reads the string literal whose opening quote is at `i`."""
    j, value = i + 1, []
    while j < len(text) and text[j] != '"':
        if text[j] == "\\":
            value.append(text[j:j + 2])
            j += 2
        else:
            value.append(text[j])
            j += 1
    tokens.append(("str", "".join(value)))
    return j + 1


# --- modules ----------------------------------------------------------------


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.children = {}  # name -> Module
        self.defs = set()
        self.uses = {}  # local name -> absolute-ish path (list), with `self` resolved later
        self.globs = []  # paths
        self.pub_globs = []  # paths re-exported whole: `pub use x::*`
        self.refs = []  # paths named in code (lists of segments)
        self.names = set()  # bare identifiers in code, which a glob may bring


def attributes_before(tokens, k):
    """The attribute texts just before token `k` (skipping visibility)."""
    j = k - 1
    # `pub`, `pub(crate)`, `pub(in path)`
    if j >= 0 and tokens[j] == ")":
        d = 0
        while j >= 0:
            if tokens[j] == ")":
                d += 1
            elif tokens[j] == "(":
                d -= 1
                if d == 0:
                    break
            j -= 1
        j -= 1
    if j >= 0 and tokens[j] == "pub":
        j -= 1
    attrs = []
    while j >= 0 and tokens[j] == "]":
        d, e = 0, j
        while j >= 0:
            if tokens[j] == "]":
                d += 1
            elif tokens[j] == "[":
                d -= 1
                if d == 0:
                    break
            j -= 1
        if j >= 1 and tokens[j - 1] == "#":
            attrs.append(tokens[j + 1:e])
            j -= 2
        elif j >= 2 and tokens[j - 1] == "!" and tokens[j - 2] == "#":
            break
        else:
            break
    return attrs


def is_test_only(attrs):
    for a in attrs:
        words = [t for t in a if isinstance(t, str)]
        if words[:1] == ["cfg"] and words[1:] in (["(", "test", ")"], ["(", "doctest", ")"]):
            return True
    return False


def path_attr(attrs):
    for a in attrs:
        if a and a[0] == "path" and len(a) >= 3 and isinstance(a[2], tuple):
            return a[2][1]
    return None


def skip_item(tokens, k):
    """The index past the item that starts at `k`: its `;` or its body."""
    d = 0
    while k < len(tokens):
        t = tokens[k]
        if t in ("(", "["):
            d += 1
        elif t in (")", "]"):
            d -= 1
        elif t == "{":
            e = matching(tokens, k)
            if d == 0:
                return e + 1
            k = e
        elif t == ";" and d == 0:
            return k + 1
        k += 1
    return k


def matching(tokens, k):
    d = 0
    for j in range(k, len(tokens)):
        if tokens[j] == "{":
            d += 1
        elif tokens[j] == "}":
            d -= 1
            if d == 0:
                return j
    return len(tokens) - 1


def parse_use_tree(tokens, k, prefix, out):
    """Parses a use tree at `k`; appends (local name or '*', path) to out.
    Returns the index past the tree."""
    path = list(prefix)
    while k < len(tokens):
        t = tokens[k]
        if t == "{":
            k += 1
            while tokens[k] != "}":
                k = parse_use_tree(tokens, k, path, out)
                if tokens[k] == ",":
                    k += 1
            return k + 1
        if t == "*":
            out.append(("*", path))
            return k + 1
        if isinstance(t, str) and IDENT.fullmatch(t):
            path.append(t)
            k += 1
            if k < len(tokens) and tokens[k] == "::":
                k += 1
                continue
            if k < len(tokens) and tokens[k] == "as":
                alias = tokens[k + 1]
                out.append((alias, path))
                return k + 2
            name = path[-1] if path[-1] != "self" else (path[-2] if len(path) > 1 else "self")
            if path[-1] == "self":
                path = path[:-1]
            out.append((name, path))
            return k
        if t == "::":  # a leading `::` (an extern crate)
            path.append("::")
            k += 1
            continue
        return k + 1
    return k


def parse_scope(mod, tokens, start, end, load_child, tests):
    """Fills `mod` from tokens[start:end], its body (no braces)."""
    k = start
    depth = 0
    while k < end:
        t = tokens[k]
        if t == "{":
            depth += 1
            k += 1
            continue
        if t == "}":
            depth -= 1
            k += 1
            continue
        if not isinstance(t, str):
            k += 1
            continue
        if t in ("mod", "use", "fn", "impl") or t in KEYWORDS_DEF or t == "macro_rules":
            attrs = attributes_before(tokens, k)
            if not tests and is_test_only(attrs) and not (k > 0 and tokens[k - 1] == "::"):
                k = skip_item(tokens, k)
                continue
        if t == "mod" and k + 1 < end and IDENT.fullmatch(str(tokens[k + 1])):
            name = tokens[k + 1]
            attrs = attributes_before(tokens, k)
            if tokens[k + 2] == ";":
                child = load_child(mod, name, path_attr(attrs))
                if child is not None:
                    mod.children[name] = child
                k += 3
                continue
            if tokens[k + 2] == "{":
                e = matching(tokens, k + 2)
                child = Module(mod.path + (name,), mod.file)
                mod.children[name] = child
                parse_scope(child, tokens, k + 3, e, load_child, tests)
                k = e + 1
                continue
        if t == "use" and not (k > 0 and tokens[k - 1] == "::"):
            out = []
            e = parse_use_tree(tokens, k + 1, [], out)
            public = k > 0 and (tokens[k - 1] == "pub" or (tokens[k - 1] == ")" and "pub" in tokens[max(0, k - 6):k]))
            for name, path in out:
                if name == "*":
                    mod.globs.append(path)
                    if public:
                        mod.pub_globs.append(path)
                elif name != "_":
                    mod.uses.setdefault(name, path)
                mod.refs.append(path + ([] if name != "*" else []))
            k = e
            continue
        if depth == 0 and (t in KEYWORDS_DEF or t == "macro_rules") and k + 1 < end:
            nxt = tokens[k + 1]
            if t == "macro_rules":
                nxt = tokens[k + 2] if tokens[k + 1] == "!" else None
            if isinstance(nxt, str) and IDENT.fullmatch(nxt) and nxt not in ("fn", "mut"):
                mod.defs.add(nxt)
        # A path in code: IDENT (:: IDENT)+
        if IDENT.fullmatch(t) and k + 1 < end and tokens[k + 1] == "::" and not (
            k > 0 and tokens[k - 1] == "::"
        ):
            path = [t]
            j = k + 1
            while j + 1 < end and tokens[j] == "::" and isinstance(tokens[j + 1], str) and IDENT.fullmatch(tokens[j + 1]):
                path.append(tokens[j + 1])
                j += 2
            mod.refs.append(path)
            k = j
            continue
        if IDENT.fullmatch(t) and not (k > 0 and tokens[k - 1] in ("::", ".")):
            mod.names.add(t)
        k += 1


# --- crates ---------------------------------------------------------------


class Crate:
    def __init__(self, name, root_file):
        self.name = name
        self.files = {}
        self.root = self.load(root_file, (), is_root=True)

    def load(self, file, path, is_root=False):
        file = file.resolve()
        text = file.read_text(encoding="utf-8")
        mod = Module(path, file)
        self.files.setdefault(file, mod)
        tokens = tokenize(text)
        parse_scope(mod, tokens, 0, len(tokens), lambda m, n, p: self.child(m, n, p, is_root), self.tests)
        return mod

    def child(self, parent, name, path_attr, parent_is_root):
        base = parent.file.parent
        if path_attr is not None:
            f = base / path_attr
            return self.load(f, parent.path + (name,)) if f.is_file() else None
        owns_dir = parent_is_root or parent.file.name == "mod.rs"
        d = base if owns_dir else base / parent.file.stem
        for f in (d / f"{name}.rs", d / name / "mod.rs"):
            if f.is_file():
                return self.load(f, parent.path + (name,))
        return None

    tests = False


def module_at(root, path):
    m = root
    for seg in path:
        m = m.children.get(seg)
        if m is None:
            return None
    return m


def absolute(mod, root, segs):
    """The path `segs`, named in `mod`, from the crate root; None if external."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        return list(segs[1:])
    if head == "self":
        return list(mod.path) + list(segs[1:])
    if head == "super":
        base = list(mod.path)
        i = 0
        while i < len(segs) and segs[i] == "super":
            if not base:
                return None
            base.pop()
            i += 1
        return base + list(segs[i:])
    if head in mod.children:
        return list(mod.path) + list(segs)
    if head in mod.uses and mod.uses[head] != segs:
        target = absolute(mod, root, mod.uses[head])
        return None if target is None else target + list(segs[1:])
    return None


def resolve(root, path, seen=None):
    """The module that defines the item `path` names; None for a module
    itself or for what cannot be found (macros, external items)."""
    seen = seen or set()
    key = tuple(path)
    if key in seen:
        return None
    seen.add(key)
    m = root
    for i, seg in enumerate(path):
        if seg in m.children:
            m = m.children[seg]
            continue
        if seg in m.defs:
            return m
        if seg in m.uses:
            target = absolute(m, root, m.uses[seg])
            if target is None:
                return None
            return resolve(root, target + list(path[i + 1:]), seen)
        for g in m.globs:
            target = absolute(m, root, g)
            if target is not None:
                found = resolve(root, target + list(path[i:]), seen)
                if found is not None:
                    return found
        return None
    return None


def all_modules(mod):
    yield mod
    for c in mod.children.values():
        yield from all_modules(c)


def graphs(crate):
    files, modules = {}, {}
    for mod in all_modules(crate.root):
        # A bare name that the module neither defines nor imports by name
        # may come from one of its globs.
        globbed = []
        if mod.globs:
            for name in mod.names - mod.defs - set(mod.uses) - set(mod.children):
                for g in mod.globs:
                    target = absolute(mod, crate.root, g)
                    if target is not None and resolve(crate.root, target + [name]) is not None:
                        globbed.append(g + [name])
                        break
        # A glob re-exported whole depends on everything it re-exports.
        for g in mod.pub_globs:
            target = absolute(mod, crate.root, g)
            there = module_at(crate.root, target) if target is not None else None
            if there is not None:
                for name in there.defs | set(there.uses) | set(there.children):
                    globbed.append(g + [name])
        for ref in mod.refs + globbed:
            target = absolute(mod, crate.root, ref)
            if target is None:
                continue
            found = resolve(crate.root, target)
            if found is None or found.file == mod.file:
                continue
            files.setdefault(mod.file, set()).add(found.file)
            a, b = mod.path[:1], found.path[:1]
            if a and b and a != b:
                modules.setdefault(a[0], set()).add(b[0])
    return files, modules


def cycles(graph):
    """Strongly connected sets of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ()), key=str):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp, key=str))

    sys.setrecursionlimit(10000)
    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}, key=str):
        if v not in index:
            visit(v)
    return out


def crate_roots(workspace):
    manifest = workspace / "Cargo.toml"
    members = []
    if tomllib is not None:
        members = tomllib.loads(manifest.read_text())["workspace"]["members"]
    else:
        members = re.findall(r'"([^"]+)"', manifest.read_text().split("members")[1].split("]")[0])
    for member in members:
        d = workspace / member
        name = d.name
        src = d / "src"
        for root in [src / "lib.rs", src / "main.rs", *sorted(src.glob("bin/*.rs")), *sorted(src.glob("bin/*/main.rs"))]:
            if root.is_file():
                kind = root.relative_to(src)
                yield f"{name} ({kind})", root


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workspace", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    ap.add_argument("--edges", action="store_true", help="print every edge")
    ap.add_argument("--tests", action="store_true", help="count test code too")
    ap.add_argument("--crate", help="only the crate whose directory has this name")
    args = ap.parse_args()
    Crate.tests = args.tests
    workspace = args.workspace.resolve()
    failed = False
    for label, root in crate_roots(workspace):
        if args.crate and not label.startswith(args.crate + " "):
            continue
        crate = Crate(label, root)
        files, modules = graphs(crate)
        rel = lambda f: str(f.relative_to(workspace)) if f.is_relative_to(workspace) else str(f)
        n_edges = sum(len(v) for v in files.values())
        print(f"{label}: {len(crate.files)} files, {n_edges} file edges")
        if args.edges:
            for a in sorted(files, key=rel):
                for b in sorted(files[a], key=rel):
                    print(f"  {rel(a)} -> {rel(b)}")
            for a in sorted(modules):
                for b in sorted(modules[a]):
                    print(f"  module {a} -> {b}")
        for comp in cycles(files):
            failed = True
            print(f"  circle of files: {' <-> '.join(rel(f) for f in comp)}")
        for comp in cycles(modules):
            failed = True
            print(f"  circle of modules: {' <-> '.join(comp)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
