//! Canary tokens: unique random secrets planted in the environment and the decoy home, and a
//! matcher that finds them again in any bytes — as they are, or encoded in hex, base32 or
//! base64 (standard and URL-safe) at any alignment inside a larger encoded payload.
//!
//! A canary appearing in a DNS name, in bytes sent over a socket, in a file the tree wrote or in
//! text returned to the caller is evidence that cannot be forged by the subject's own output:
//! the values are drawn fresh for every run and exist nowhere else.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
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
}

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
    /// Needles compared without regard to ASCII case: hex and base32 forms.
    folded: Option<AhoCorasick>,
    folded_ids: Vec<(usize, Form)>,
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
        let mut exact = Vec::new();
        let mut folded = Vec::new();
        for (i, c) in list.iter().enumerate() {
            let v = c.value.as_bytes();
            exact.push((c.value.clone(), i, Form::Plain));
            for enc in [&BASE64, &BASE64URL] {
                for n in aligned(enc, 6, v) {
                    exact.push((n, i, Form::Base64));
                }
            }
            folded.push((HEXLOWER.encode(v), i, Form::Base16));
            for n in aligned(&BASE32, 5, v) {
                folded.push((n, i, Form::Base32));
            }
        }
        let build = |needles: &[(String, usize, Form)], fold: bool| {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(fold)
                .match_kind(MatchKind::Standard)
                .build(needles.iter().map(|n| n.0.as_bytes()))
        };
        // Building fails only past aho-corasick's size limits, far beyond a few dozen needles.
        Canaries {
            list,
            exact: build(&exact, false).ok(),
            exact_ids: exact.into_iter().map(|(_, i, e)| (i, e)).collect(),
            folded: build(&folded, true).ok(),
            folded_ids: folded.into_iter().map(|(_, i, e)| (i, e)).collect(),
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

    /// Every canary in `bytes`, once per canary and encoding.
    pub fn find(&self, bytes: &[u8]) -> Vec<Hit> {
        let mut hits: Vec<Hit> = Vec::new();
        let mut add = |(i, enc): (usize, Form)| {
            let planted = self.list[i].planted.clone();
            if !hits
                .iter()
                .any(|h| h.planted == planted && h.encoding == enc)
            {
                hits.push(Hit {
                    planted,
                    encoding: enc,
                });
            }
        };
        for (ac, ids) in [
            (&self.exact, &self.exact_ids),
            (&self.folded, &self.folded_ids),
        ] {
            for m in ac.iter().flat_map(|ac| ac.find_overlapping_iter(bytes)) {
                add(ids[m.pattern().as_usize()]);
            }
        }
        hits
    }

    /// Every canary in a DNS name: the labels are joined without their dots first, since an
    /// exfiltrating program splits its encoded payload over several labels.
    pub fn find_in_name(&self, name: &str) -> Vec<Hit> {
        let joined: String = name.chars().filter(|c| *c != '.').collect();
        self.find(joined.as_bytes())
    }
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
