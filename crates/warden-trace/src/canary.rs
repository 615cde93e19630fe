//! Canary tokens: unique random secrets planted in the environment and the decoy home, and a
//! matcher that finds them again in any bytes — as they are, or encoded in hex, base32 or
//! base64 (standard and URL-safe) at any alignment inside a larger encoded payload; reversed;
//! in any letter case; XORed with a single byte; as a fragment of at least [`FRAGMENT`]
//! characters of its random part (half of a secret in each of two messages is found in
//! both); and inside a percent-encoded, JSON/Unicode-escaped or gzip/zlib/deflate-compressed
//! payload. Every hit says which transformation found it.
//!
//! Guarantees: the work is linear in the bytes given (one automaton pass per view), and the
//! decoded views are bounded ([`MAX_VIEW`] bytes each, at most [`MAX_INFLATES`] decompression
//! attempts), so a hostile payload cannot make a scan expensive.
//!
//! A canary appearing in a DNS name, in bytes sent over a socket, in a file the tree wrote or in
//! text returned to the caller is evidence that cannot be forged by the subject's own output:
//! the values are drawn fresh for every run and exist nowhere else.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use data_encoding::{BASE32, BASE32_NOPAD, BASE64, BASE64URL, Encoding, HEXLOWER};
use serde::{Deserialize, Serialize};

/// One planted secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Canary {
    /// Where it was planted: an environment variable (`env:GITHUB_TOKEN`) or a decoy file
    /// (`file:~/.aws/credentials`).
    pub planted: String,
    /// The secret itself.
    pub value: String,
}

/// How a canary was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// As planted.
    Plain,
    /// Hexadecimal (either case).
    Base16,
    /// Base32 (either case, padded or not).
    Base32,
    /// Base64, standard or URL-safe alphabet.
    Base64,
    /// Whole, but in another letter case.
    Case,
    /// Whole, reversed (in any letter case).
    Reversed,
    /// XORed with one byte.
    Xor,
    /// A piece of at least [`FRAGMENT`] characters of its random part (as planted or reversed,
    /// any case).
    Fragment,
    /// Inside a percent-encoded payload.
    PercentEncoded,
    /// Inside a JSON or Unicode-escaped payload (`\u0067`, `\x67`).
    Escaped,
    /// Inside a gzip, zlib or deflate stream.
    Compressed,
}

impl Form {
    /// How direct a find it is (0: as planted; higher: more was undone to find it). A stream
    /// that first showed a fragment and later the whole secret is reported again for the
    /// better find.
    pub fn rank(self) -> u8 {
        match self {
            Form::Plain => 0,
            Form::Base16 | Form::Base32 | Form::Base64 => 1,
            Form::Case | Form::Reversed | Form::Xor => 2,
            Form::PercentEncoded | Form::Escaped | Form::Compressed => 3,
            Form::Fragment => 4,
        }
    }
}

/// The most direct find of each canary reported so far in one place (a flow, a stream, a
/// window's queries): a find is worth reporting when it is the first, or more direct than
/// what was (a fragment first, the whole secret later).
#[derive(Debug, Clone, Default)]
pub struct Reported(std::collections::HashMap<String, u8>);

impl Reported {
    /// Whether `hit` is worth reporting here; if so, it is remembered.
    pub fn improves(&mut self, hit: &Hit) -> bool {
        let rank = hit.encoding.rank();
        let best = self.0.entry(hit.planted.clone()).or_insert(u8::MAX);
        let better = rank < *best;
        *best = (*best).min(rank);
        better
    }

    /// Whether `hit` was reported here already as directly (or more).
    pub fn covers(&self, hit: &Hit) -> bool {
        self.0
            .get(&hit.planted)
            .is_some_and(|best| *best <= hit.encoding.rank())
    }
}

/// Characters of a fragment, at least.
pub const FRAGMENT: usize = 12;
/// Characters at a canary's start that may be a fixed prefix (`ghp_`, `AKIA`): fragments
/// start after them, so every fragment is random characters only.
const PREFIX: usize = 4;
/// Bytes of a decoded view (percent-decoded, unescaped, decompressed), at most.
pub const MAX_VIEW: usize = 1 << 20;
/// Streams inflated per scan, at most.
pub const MAX_INFLATES: usize = 8;
/// Compression headers tried per scan, at most (a failed try costs a few bytes' work).
const MAX_CANDIDATES: usize = 4096;

/// One canary found in some bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// Where the canary had been planted.
    pub planted: String,
    /// How it was encoded where it was found.
    pub encoding: Form,
}

/// The canaries of one run and their matchers.
#[derive(Debug, Clone)]
pub struct Canaries {
    list: Vec<Canary>,
    /// Needles compared exactly: plain and base64 forms.
    exact: Option<AhoCorasick>,
    exact_ids: Vec<(usize, Form)>,
    /// Needles compared without regard to ASCII case: hex and base32 forms, the value in any
    /// case, reversed, and its fragments.
    folded: Option<AhoCorasick>,
    folded_ids: Vec<(usize, Form)>,
    /// The XOR of each canary's neighbouring bytes, which a single-byte XOR leaves unchanged.
    xor: Option<AhoCorasick>,
    xor_ids: Vec<usize>,
    /// Every [`FRAGMENT`]-byte piece of each canary's random part.
    grams: Grams,
}

/// The base of the rolling hash of [`Grams`].
const BASE: u64 = 0x100_0000_01b3;
/// Bits of the prefilter of [`Grams`].
const FILTER_BITS: usize = 1 << 16;

/// The pieces of [`FRAGMENT`] bytes of the canaries (as planted and reversed), found in any
/// letter case by a rolling hash over the input, a bit-set prefilter, then a comparison:
/// linear in the input and built in microseconds (an automaton of a thousand needles took
/// milliseconds at every traced sandbox's start).
#[derive(Debug, Clone)]
struct Grams {
    by_hash: std::collections::HashMap<u64, Vec<([u8; FRAGMENT], usize)>>,
    filter: Vec<u64>,
}

impl Default for Grams {
    fn default() -> Self {
        Grams {
            by_hash: std::collections::HashMap::new(),
            filter: vec![0; FILTER_BITS / 64],
        }
    }
}

/// The rolling hash of `gram` (lower-cased).
fn gram_hash(gram: &[u8]) -> u64 {
    gram.iter().fold(0u64, |h, b| {
        h.wrapping_mul(BASE)
            .wrapping_add(u64::from(b.to_ascii_lowercase()))
    })
}

impl Grams {
    fn bit(h: u64) -> (usize, u64) {
        let i = usize::try_from(h >> 48).unwrap_or(0) % FILTER_BITS;
        (i / 64, 1u64 << (i % 64))
    }

    fn add(&mut self, gram: &[u8], canary: usize) {
        let Ok(g) = <[u8; FRAGMENT]>::try_from(gram) else {
            return;
        };
        let h = gram_hash(&g);
        let (word, mask) = Self::bit(h);
        self.filter[word] |= mask;
        self.by_hash
            .entry(h)
            .or_default()
            .push((g.map(|b| b.to_ascii_lowercase()), canary));
    }

    /// The canaries one of whose pieces `bytes` holds, in any letter case.
    fn find(&self, bytes: &[u8], out: &mut Vec<usize>) {
        if self.by_hash.is_empty() || bytes.len() < FRAGMENT {
            return;
        }
        // BASE^(FRAGMENT-1): what the byte leaving the window weighed.
        let top = (1..FRAGMENT).fold(1u64, |p, _| p.wrapping_mul(BASE));
        let mut h = gram_hash(&bytes[..FRAGMENT]);
        for start in 0..=bytes.len() - FRAGMENT {
            if start > 0 {
                let gone = u64::from(bytes[start - 1].to_ascii_lowercase());
                let came = u64::from(bytes[start + FRAGMENT - 1].to_ascii_lowercase());
                h = h
                    .wrapping_sub(gone.wrapping_mul(top))
                    .wrapping_mul(BASE)
                    .wrapping_add(came);
            }
            let (word, mask) = Self::bit(h);
            if self.filter[word] & mask == 0 {
                continue;
            }
            let window = &bytes[start..start + FRAGMENT];
            for (gram, canary) in self.by_hash.get(&h).into_iter().flatten() {
                if window.eq_ignore_ascii_case(gram) && !out.contains(canary) {
                    out.push(*canary);
                }
            }
        }
    }
}

/// How many characters at the start of a canary may be a fixed prefix (`ghp_`, `AKIA`,
/// `sk-ant-api03-`): at least [`PREFIX`], and up to the last `-` or `_` among its first 16.
fn fixed_prefix(value: &[u8]) -> usize {
    value
        .iter()
        .take(16)
        .rposition(|b| matches!(b, b'-' | b'_'))
        .map_or(PREFIX, |i| (i + 1).max(PREFIX))
}

/// The XOR of each byte of `bytes` with the next.
fn delta(bytes: &[u8]) -> Vec<u8> {
    bytes.windows(2).map(|w| w[0] ^ w[1]).collect()
}

/// Random characters from `alphabet` (uniform: rejection sampling over random bytes).
pub fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut out = String::with_capacity(len);
    let limit = 256 - (256 % alphabet.len().clamp(1, 256));
    while out.len() < len {
        let mut buf = [0u8; 64];
        if getrandom::fill(&mut buf).is_err() {
            // No getrandom(2): std's per-process random hash keys are the next best source.
            use std::hash::BuildHasher;
            let state = std::collections::hash_map::RandomState::new();
            for (i, chunk) in buf.chunks_mut(8).enumerate() {
                let word = state.hash_one((i, out.len())).to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
        for b in buf {
            if usize::from(b) < limit && out.len() < len {
                out.push(char::from(alphabet[usize::from(b) % alphabet.len()]));
            }
        }
    }
    out
}

/// Letters and digits.
pub const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Encodings of `value` that survive being embedded at any byte offset of a larger payload:
/// for each alignment, the characters of the encoding that depend only on `value`'s bytes.
fn aligned(enc: &Encoding, bits: usize, value: &[u8]) -> Vec<String> {
    let groups = if bits == 6 { 3 } else { 5 };
    (0..groups)
        .map(|offset| {
            let mut data = vec![0u8; offset];
            data.extend_from_slice(value);
            let text = enc.encode(&data);
            let start = (8 * offset).div_ceil(bits);
            let end = 8 * (offset + value.len()) / bits;
            text.get(start..end).unwrap_or_default().to_owned()
        })
        .filter(|n| n.len() >= 8)
        .collect()
}

impl Canaries {
    /// Matchers for `list`.
    pub fn new(list: Vec<Canary>) -> Canaries {
        let mut exact: Vec<(Vec<u8>, usize, Form)> = Vec::new();
        let mut folded: Vec<(Vec<u8>, usize, Form)> = Vec::new();
        let mut deltas: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut grams = Grams::default();
        for (i, c) in list.iter().enumerate() {
            let v = c.value.as_bytes();
            exact.push((v.to_vec(), i, Form::Plain));
            for enc in [&BASE64, &BASE64URL] {
                for n in aligned(enc, 6, v) {
                    exact.push((n.into_bytes(), i, Form::Base64));
                }
            }
            // XOR with one byte keeps the XOR of neighbouring bytes: one needle finds every key.
            if v.len() > 1 {
                deltas.push((delta(v), i));
            }
            folded.push((HEXLOWER.encode(v).into_bytes(), i, Form::Base16));
            for n in aligned(&BASE32, 5, v) {
                folded.push((n.into_bytes(), i, Form::Base32));
            }
            folded.push((v.to_vec(), i, Form::Case));
            let reversed: Vec<u8> = v.iter().rev().copied().collect();
            folded.push((reversed.clone(), i, Form::Reversed));
            let prefix = fixed_prefix(v);
            if v.len() > prefix + FRAGMENT {
                for start in prefix..=v.len() - FRAGMENT {
                    grams.add(&v[start..start + FRAGMENT], i);
                    let r_start = v.len() - start - FRAGMENT;
                    grams.add(&reversed[r_start..r_start + FRAGMENT], i);
                }
            }
        }
        let build = |needles: &[(Vec<u8>, usize, Form)], fold: bool| {
            // A contiguous NFA: built in a fraction of a DFA's time (every traced sandbox builds
            // these at its start), and searched nearly as fast.
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(fold)
                .match_kind(MatchKind::Standard)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(needles.iter().map(|n| n.0.as_slice()))
        };
        // Building fails only past aho-corasick's size limits, far beyond a few dozen needles.
        Canaries {
            list,
            exact: build(&exact, false).ok(),
            exact_ids: exact.into_iter().map(|(_, i, e)| (i, e)).collect(),
            folded: build(&folded, true).ok(),
            folded_ids: folded.into_iter().map(|(_, i, e)| (i, e)).collect(),
            xor: AhoCorasick::new(deltas.iter().map(|d| d.0.as_slice())).ok(),
            xor_ids: deltas.into_iter().map(|(_, i)| i).collect(),
            grams,
        }
    }

    /// The canaries.
    pub fn list(&self) -> &[Canary] {
        &self.list
    }

    /// The value planted at `planted`, if any.
    pub fn value(&self, planted: &str) -> Option<&str> {
        self.list
            .iter()
            .find(|c| c.planted == planted)
            .map(|c| c.value.as_str())
    }

    /// Every canary in `bytes`, once per canary, each with the most direct transformation that
    /// found it: as planted before another case, whole before a fragment, and the bytes as
    /// given before a decoded view of them.
    pub fn find(&self, bytes: &[u8]) -> Vec<Hit> {
        let mut found: Vec<(usize, Form)> = self.find_direct(bytes);
        for (view, form) in views(bytes) {
            for (i, _) in self.find_direct(&view) {
                found.push((i, form));
            }
        }
        found.sort_by_key(|(i, f)| (*i, f.rank()));
        let mut hits: Vec<Hit> = Vec::new();
        let mut last = None;
        for (i, form) in found {
            if last == Some(i) {
                continue;
            }
            last = Some(i);
            hits.push(Hit {
                planted: self.list[i].planted.clone(),
                encoding: form,
            });
        }
        hits
    }

    /// The canaries in `bytes` as they are (no decoded view), with every form that matched.
    fn find_direct(&self, bytes: &[u8]) -> Vec<(usize, Form)> {
        let mut out = Vec::new();
        if let Some(ac) = &self.xor
            && bytes.len() > 1
        {
            let d = delta(bytes);
            for m in ac.find_overlapping_iter(&d) {
                let i = self.xor_ids[m.pattern().as_usize()];
                // The key: what turns the canary's first byte into the one found. No key is the
                // plain form, and 0x20 only changes letters' case (found as such).
                let key = bytes[m.start()] ^ self.list[i].value.as_bytes()[0];
                // 0x20 changes the case of letters but not of digits or `_`: a plain change of
                // case is found as such, anything else as XOR.
                let value = self.list[i].value.as_bytes();
                let window = bytes
                    .get(m.start()..m.start() + value.len())
                    .unwrap_or_default();
                let only_case = key == 0x20 && window.eq_ignore_ascii_case(value);
                if key != 0 && !only_case && !out.contains(&(i, Form::Xor)) {
                    out.push((i, Form::Xor));
                }
            }
        }
        for (ac, ids) in [
            (&self.exact, &self.exact_ids),
            (&self.folded, &self.folded_ids),
        ] {
            for m in ac.iter().flat_map(|ac| ac.find_overlapping_iter(bytes)) {
                let id = ids[m.pattern().as_usize()];
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        let mut pieces = Vec::new();
        self.grams.find(bytes, &mut pieces);
        for i in pieces {
            if !out.contains(&(i, Form::Fragment)) {
                out.push((i, Form::Fragment));
            }
        }
        out
    }

    /// Every canary in a DNS name: the labels are joined without their dots first, since an
    /// exfiltrating program splits its encoded payload over several labels.
    pub fn find_in_name(&self, name: &str) -> Vec<Hit> {
        let joined: String = name.chars().filter(|c| *c != '.').collect();
        self.find(joined.as_bytes())
    }
}

/// The decoded views of `bytes` worth a second look, each with the transformation it undoes:
/// percent-decoded (when it holds `%XX`), unescaped (when it holds `\\u` or `\\x`), and
/// inflated (from each gzip or zlib header, and as raw deflate from its start and after an
/// HTTP head). Each at most [`MAX_VIEW`] bytes.
fn views(bytes: &[u8]) -> Vec<(Vec<u8>, Form)> {
    let mut out = Vec::new();
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if bytes
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
    {
        out.push((percent_decode(bytes), Form::PercentEncoded));
    }
    if has(b"\\u") || has(b"\\x") {
        out.push((unescape(bytes), Form::Escaped));
    }
    // Every header is tried (a decoy `x^` — a valid zlib header in plain text — must not use
    // up the budget), at most MAX_CANDIDATES of them; at most MAX_INFLATES streams that
    // inflate to something are kept.
    let mut inflated_streams = 0;
    let mut candidates = 0;
    for (at, w) in bytes.windows(2).enumerate() {
        let gzip = w == [0x1f, 0x8b];
        let zlib = w[0] == 0x78 && matches!(w[1], 0x01 | 0x5e | 0x9c | 0xda);
        if !(gzip || zlib) {
            continue;
        }
        candidates += 1;
        if candidates > MAX_CANDIDATES || inflated_streams >= MAX_INFLATES {
            break;
        }
        let data = &bytes[at..];
        let inflated = if gzip {
            inflate(flate2::read::MultiGzDecoder::new(data))
        } else {
            inflate(flate2::read::ZlibDecoder::new(data))
        };
        if !inflated.is_empty() {
            inflated_streams += 1;
            out.push((inflated, Form::Compressed));
        }
    }
    // Raw deflate has no header to find it by: tried where a body starts.
    let body = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    for at in [0, body] {
        let inflated = inflate(flate2::read::DeflateDecoder::new(&bytes[at..]));
        if !inflated.is_empty() {
            out.push((inflated, Form::Compressed));
        }
        if body == 0 {
            break;
        }
    }
    out
}

/// What `reader` inflates to, at most [`MAX_VIEW`] bytes (empty when it is no stream).
fn inflate(reader: impl std::io::Read) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let _ = reader.take(MAX_VIEW as u64).read_to_end(&mut out);
    out
}

/// `bytes` with every `%XX` decoded (and `+` kept as it is).
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().min(MAX_VIEW));
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_VIEW {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(0));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `bytes` with JSON and C-style escapes undone: `\\uXXXX` (ASCII and Latin-1 code points as
/// one byte, others as UTF-8), `\\xXX`, and `\\"`, `\\\\`, `\\/`.
fn unescape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().min(MAX_VIEW));
    let mut i = 0;
    let hex_at = |at: usize, n: usize| -> Option<u32> {
        let s = std::str::from_utf8(bytes.get(at..at + n)?).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    while i < bytes.len() && out.len() < MAX_VIEW {
        if bytes[i] == b'\\' {
            match bytes.get(i + 1) {
                Some(b'u') => {
                    if let Some(cp) = hex_at(i + 2, 4) {
                        match u8::try_from(cp) {
                            Ok(b) => out.push(b),
                            Err(_) => {
                                let c = char::from_u32(cp).unwrap_or('\u{fffd}');
                                out.extend_from_slice(c.to_string().as_bytes());
                            }
                        }
                        i += 6;
                        continue;
                    }
                }
                Some(b'x') => {
                    if let Some(b) = hex_at(i + 2, 2).and_then(|v| u8::try_from(v).ok()) {
                        out.push(b);
                        i += 4;
                        continue;
                    }
                }
                Some(c @ (b'"' | b'\\' | b'/')) => {
                    out.push(*c);
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Base32 without padding, as DNS exfiltration tools usually send it (for tests and fixtures).
pub fn base32_nopad(data: &[u8]) -> String {
    BASE32_NOPAD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set() -> Canaries {
        Canaries::new(vec![
            Canary {
                planted: "env:GITHUB_TOKEN".into(),
                value: format!("ghp_{}", random_string(ALNUM, 36)),
            },
            Canary {
                planted: "file:~/.aws/credentials".into(),
                value: random_string(ALNUM, 40),
            },
        ])
    }

    #[test]
    fn finds_each_encoding_and_nothing_else() {
        let c = set();
        let v = c.list()[0].value.clone();
        let plain = format!("token={v}&x=1");
        assert_eq!(c.find(plain.as_bytes())[0].encoding, Form::Plain);
        let hex = HEXLOWER.encode(v.as_bytes()).to_uppercase();
        assert_eq!(c.find(hex.as_bytes())[0].encoding, Form::Base16);
        let b32 = base32_nopad(format!("k={v}").as_bytes()).to_lowercase();
        assert_eq!(c.find(b32.as_bytes())[0].encoding, Form::Base32);
        let b64 = BASE64URL.encode(format!("ab{v}zz").as_bytes());
        assert_eq!(c.find(b64.as_bytes())[0].encoding, Form::Base64);
        assert!(c.find(b"ghp_not-a-canary and some text").is_empty());
        // A DNS name split into labels.
        let name = format!("{}.{}.exfil.invalid", &hex[..30], &hex[30..]);
        let hits = c.find_in_name(&name);
        assert_eq!(hits[0].planted, "env:GITHUB_TOKEN");
    }

    /// Issue #32: a secret sent reversed and case-swapped, XORed, split in two, escaped,
    /// percent-encoded or compressed is still found, and each hit says how.
    #[test]
    fn secrets_however_dressed_are_found() {
        use std::io::Write;
        let c = set();
        let v = c.list()[1].value.clone();
        let swapped: String = v
            .chars()
            .rev()
            .map(|ch| {
                if ch.is_ascii_uppercase() {
                    ch.to_ascii_lowercase()
                } else {
                    ch.to_ascii_uppercase()
                }
            })
            .collect();
        let form = |bytes: &[u8]| {
            c.find(bytes)
                .into_iter()
                .find(|h| h.planted == "file:~/.aws/credentials")
                .map(|h| h.encoding)
        };
        assert_eq!(
            form(format!("x={swapped}").as_bytes()),
            Some(Form::Reversed)
        );
        assert_eq!(form(v.to_lowercase().as_bytes()), Some(Form::Case));
        let xored: Vec<u8> = v.bytes().map(|b| b ^ 0x5a).collect();
        assert_eq!(form(&xored), Some(Form::Xor));
        // Half of it in each of two messages: each half is found.
        let (a, b) = v.split_at(v.len() / 2);
        assert_eq!(
            form(format!("part one {a}").as_bytes()),
            Some(Form::Fragment)
        );
        assert_eq!(
            form(format!("{b} part two").as_bytes()),
            Some(Form::Fragment)
        );
        let pct: String = v.bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(
            form(format!("q={pct}&x=1").as_bytes()),
            Some(Form::PercentEncoded)
        );
        let escaped: String = v
            .chars()
            .map(|ch| format!("\\u{:04x}", ch as u32))
            .collect();
        assert_eq!(
            form(format!("{{\"k\": \"{escaped}\"}}").as_bytes()),
            Some(Form::Escaped)
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(format!("creds={v}&again={v}").as_bytes())
            .unwrap();
        let mut body = b"POST /x HTTP/1.1\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
        body.extend(gz.finish().unwrap());
        assert_eq!(form(&body), Some(Form::Compressed));
        // Repeated, so the stream holds no stored (verbatim) block.
        let thrice = format!("{v} {v} {v}");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(thrice.as_bytes()).unwrap();
        let z_bytes = z.finish().unwrap();
        assert_eq!(form(&z_bytes), Some(Form::Compressed));
        let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        d.write_all(thrice.as_bytes()).unwrap();
        let mut raw = b"POST /y HTTP/1.1\r\nContent-Encoding: deflate\r\n\r\n".to_vec();
        raw.extend(d.finish().unwrap());
        assert_eq!(form(&raw), Some(Form::Compressed));
        // As planted stays plain; eleven characters are not a fragment; the fixed prefix of a
        // token is not its secret.
        assert_eq!(form(v.as_bytes()), Some(Form::Plain));
        assert_eq!(form(&v.as_bytes()[5..16]), None);
        let ghp = &c.list()[0].value;
        assert!(c.find(&ghp.as_bytes()[..11]).is_empty());
        // An outside review: 0x20 also changes digits, so it is XOR unless only letters moved;
        // decoy zlib headers (`x^` is one, in plain text) do not use up the inflate budget; a
        // long fixed prefix (`sk-ant-api03-`) is not a fragment of the secret.
        let with_digits: Vec<u8> = v.bytes().map(|b| b ^ 0x20).collect();
        if v.bytes().any(|b| b.is_ascii_digit()) {
            assert_eq!(form(&with_digits), Some(Form::Xor));
        }
        let mut decoys = b"x^".repeat(64);
        decoys.extend(&z_bytes);
        assert_eq!(form(&decoys), Some(Form::Compressed));
        assert_eq!(fixed_prefix(b"sk-ant-api03-AbCdEfGh"), 13);
        assert_eq!(fixed_prefix(b"ghp_abc"), 4);
        assert_eq!(fixed_prefix(b"AKIAXYZ"), 4);
    }

    proptest! {
        /// Whatever surrounds it and however it is encoded, a canary embedded in a payload is
        /// found, and random payloads without one produce no hit.
        #[test]
        fn embedded_canaries_are_found(pre in proptest::collection::vec(any::<u8>(), 0..40),
                                       post in proptest::collection::vec(any::<u8>(), 0..40),
                                       which in 0usize..4) {
            let c = set();
            let mut data = pre.clone();
            data.extend_from_slice(c.list()[1].value.as_bytes());
            data.extend_from_slice(&post);
            let text = match which {
                0 => HEXLOWER.encode(&data),
                1 => BASE32.encode(&data),
                2 => BASE64.encode(&data),
                _ => BASE64URL.encode(&data),
            };
            let hits = c.find(text.as_bytes());
            prop_assert!(hits.iter().any(|h| h.planted == "file:~/.aws/credentials"));
        }

        #[test]
        fn random_bytes_hit_nothing(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            prop_assert!(set().find(&data).is_empty());
            prop_assert!(set().find(BASE64.encode(&data).as_bytes()).is_empty());
        }
    }
}
