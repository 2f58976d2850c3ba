//! Static bearer tokens from a CSV file: kube-apiserver's `--token-auth-file`.
//!
//! Where it sits: the gateway loads the file once at start-up ([`TokenFile::load`], logging the
//! returned warnings); per request, its authentication layer (`gateway/src/filters/authentication.rs`)
//! calls [`Authenticators::authenticate`](crate::chain::Authenticators::authenticate), whose
//! bearer-token step looks the token up here with [`TokenFile::authenticate`].
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/authentication/token/tokenfile/tokenfile.go`
//! (`NewCSV`, `AuthenticateToken`). Its rules, kept here:
//!
//! - Each record is `token,user name,user uid[,"group1,group2,..."]`; columns after the fourth are
//!   ignored. The file is read with Go's `encoding/csv` defaults plus a variable number of fields
//!   per record: `,` separates fields, `"` quotes (a doubled `""` inside quotes is one `"`), no
//!   comment character (a line starting with `#` is an ordinary record), no trimming (a space after
//!   a comma is part of the field), blank lines are skipped. The same settings are given to the
//!   `csv` crate here.
//! - A record with fewer than 3 columns fails the whole file, with upstream's message.
//! - A record with an empty token is skipped with a warning.
//! - A token seen again replaces the earlier record, with a warning.
//! - The fourth column is split on every `,`, keeping empty entries (Go's `strings.Split`): an
//!   empty fourth column gives one empty group, `a,,b` gives `a`, `` and `b`.
//! - Tokens match exactly (byte for byte, case-sensitive); the user carries no `extra`.
//!
//! Upstream logs its warnings with klog; here they are returned to the caller, which logs them.
//!
//! Known differences from Go's reader, all on malformed files: the `csv` crate accepts a stray
//! `"` inside an unquoted field, text after a closing quote and a quote left open at the end of
//! the file, where Go's reader fails with a parse error; and it ends a record at a lone carriage
//! return, where Go keeps it in the field.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::user::UserInfo;

/// Why a token file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("open {path}: {source}")]
    Io {
        /// The path that was opened.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A record has fewer than the three required columns (upstream's message).
    #[error(
        "token file '{name}' must have at least 3 columns (token, user name, user uid), found {found}"
    )]
    TooFewColumns {
        /// The file's name (its path when loaded with [`TokenFile::load`]).
        name: String,
        /// How many columns the record has.
        found: usize,
    },
    /// The CSV reader failed.
    #[error("token file '{name}': {reason}")]
    Csv {
        /// The file's name.
        name: String,
        /// The reader's error.
        reason: String,
    },
}

/// The SHA-256 digest of a token, the key of [`TokenFile`]'s map (and of the cache of
/// verified JWTs, [`crate::token_cache`]).
pub(crate) type TokenDigest = [u8; 32];

/// The users of a token file, keyed by token.
///
/// Tokens are not kept: the map is keyed by each token's SHA-256 digest, and a lookup hashes the
/// presented token first. Comparing digests rather than token text means that how long a lookup
/// takes (hashing, then comparing the digest's bytes) tells an attacker nothing useful about how
/// much of a guessed token is right, and a memory dump holds no usable token.
#[derive(Clone, Default)]
pub struct TokenFile {
    users: HashMap<TokenDigest, UserInfo>,
}

impl fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither tokens nor their digests belong in logs.
        f.debug_struct("TokenFile")
            .field("tokens", &self.users.len())
            .finish()
    }
}

pub(crate) fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// Go's `strings.Split(s, ",")` and Rust's `str::split(',')` agree: every separator splits, empty
/// entries stay, and an empty string gives one empty entry.
fn split_groups(column: &str) -> Vec<String> {
    column.split(',').map(str::to_owned).collect()
}

fn lossy(field: &[u8]) -> String {
    String::from_utf8_lossy(field).into_owned()
}

impl TokenFile {
    /// Parses token-file text; `name` stands for the file in error and warning messages.
    ///
    /// Returns the tokens and the warnings upstream would log (empty and duplicate tokens), in
    /// file order.
    pub fn parse(text: &str, name: &str) -> Result<(TokenFile, Vec<String>), TokenFileError> {
        Self::parse_bytes(text.as_bytes(), name)
    }

    /// Reads and parses the token file at `path` (see [`TokenFile::parse`]); messages name the
    /// file by its path, as upstream does.
    pub fn load(path: &Path) -> Result<(TokenFile, Vec<String>), TokenFileError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| TokenFileError::Io {
            path: name.clone(),
            source,
        })?;
        Self::parse_bytes(&bytes, &name)
    }

    /// The parser. It works on bytes, like Go's reader, so a token that is not UTF-8 is still
    /// matched byte for byte; user names, uids and groups that are not UTF-8 are converted
    /// lossily.
    fn parse_bytes(bytes: &[u8], name: &str) -> Result<(TokenFile, Vec<String>), TokenFileError> {
        // Go's encoding/csv reader as upstream configures it: `FieldsPerRecord = -1` (flexible),
        // no `Comment`, no `TrimLeadingSpace`, `LazyQuotes` off; there is no header row.
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(b',')
            .quoting(true)
            .double_quote(true)
            .escape(None)
            .comment(None)
            .trim(csv::Trim::None)
            .from_reader(bytes);

        let mut users = HashMap::new();
        let mut warnings = Vec::new();
        // Upstream counts records once they have passed the column check.
        let mut record_number = 0usize;
        for record in reader.byte_records() {
            let record = record.map_err(|e| TokenFileError::Csv {
                name: name.to_owned(),
                reason: e.to_string(),
            })?;
            if record.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    name: name.to_owned(),
                    found: record.len(),
                });
            }
            record_number += 1;
            let token = &record[0];
            if token.is_empty() {
                warnings.push(format!(
                    "empty token has been found in token file '{name}', record number '{record_number}'"
                ));
                continue;
            }
            let user = UserInfo {
                name: lossy(&record[1]),
                uid: lossy(&record[2]),
                groups: record
                    .get(3)
                    .map(|column| split_groups(&String::from_utf8_lossy(column)))
                    .unwrap_or_default(),
                extra: Default::default(),
            };
            if users.insert(digest(token), user).is_some() {
                warnings.push(format!(
                    "duplicate token has been found in token file '{name}', record number '{record_number}'"
                ));
            }
        }
        Ok((TokenFile { users }, warnings))
    }

    /// The user whose token is exactly `token`, if any.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.authenticate_bytes(token.as_bytes())
    }

    /// [`TokenFile::authenticate`] on the raw bytes of an `Authorization` header.
    pub(crate) fn authenticate_bytes(&self, token: &[u8]) -> Option<UserInfo> {
        self.authenticate_digest(&digest(token))
    }

    /// [`TokenFile::authenticate`] by the token's [`digest`], which the chain computes once
    /// for this lookup and the token cache's.
    pub(crate) fn authenticate_digest(&self, d: &TokenDigest) -> Option<UserInfo> {
        self.users.get(d).cloned()
    }

    /// How many distinct tokens the file holds.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file holds no token (an empty file is valid, and then no token is accepted).
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, uid: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.to_owned(),
            uid: uid.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: Default::default(),
        }
    }

    /// Good files: (case, text, expected (token, user) pairs, expected token count, warnings).
    #[test]
    fn parse_good_files() {
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, &str, Vec<(&str, UserInfo)>, usize, Vec<&str>)> = vec![
            ("empty file", "", vec![], 0, vec![]),
            ("only blank lines", "\n\n\r\n", vec![], 0, vec![]),
            (
                "three columns, no groups",
                "abc,jane,1\n",
                vec![("abc", user("jane", "1", &[]))],
                1,
                vec![],
            ),
            (
                "no final newline",
                "abc,jane,1",
                vec![("abc", user("jane", "1", &[]))],
                1,
                vec![],
            ),
            (
                "quoted groups split on commas",
                "abc,jane,1,\"dev,ops\"\n",
                vec![("abc", user("jane", "1", &["dev", "ops"]))],
                1,
                vec![],
            ),
            (
                "unquoted single group",
                "abc,jane,1,system:masters\n",
                vec![("abc", user("jane", "1", &["system:masters"]))],
                1,
                vec![],
            ),
            (
                "columns after the fourth are ignored",
                "abc,jane,1,dev,ops,more\n",
                vec![("abc", user("jane", "1", &["dev"]))],
                1,
                vec![],
            ),
            (
                "empty fourth column is one empty group",
                "abc,jane,1,\n",
                vec![("abc", user("jane", "1", &[""]))],
                1,
                vec![],
            ),
            (
                "empty group entries are kept",
                "abc,jane,1,\"a,,b,\"\n",
                vec![("abc", user("jane", "1", &["a", "", "b", ""]))],
                1,
                vec![],
            ),
            (
                "spaces are not trimmed",
                " abc , jane , 1 ,\" dev, ops\"\n",
                vec![(" abc ", user(" jane ", " 1 ", &[" dev", " ops"]))],
                1,
                vec![],
            ),
            (
                "a leading # is part of the token, not a comment",
                "#abc,jane,1\n",
                vec![("#abc", user("jane", "1", &[]))],
                1,
                vec![],
            ),
            (
                "blank lines between records and CRLF endings",
                "\r\nabc,jane,1\r\n\r\n\ndef,joe,2,\"x,y\"\r\n",
                vec![
                    ("abc", user("jane", "1", &[])),
                    ("def", user("joe", "2", &["x", "y"])),
                ],
                2,
                vec![],
            ),
            (
                "doubled quotes and a quoted comma in the token",
                "\"a\"\"b,c\",jane,1\n",
                vec![("a\"b,c", user("jane", "1", &[]))],
                1,
                vec![],
            ),
            (
                "quoted newline inside a group column",
                "abc,jane,1,\"dev,\nops\"\n",
                vec![("abc", user("jane", "1", &["dev", "\nops"]))],
                1,
                vec![],
            ),
            (
                "empty user name and uid are accepted",
                "abc,,\n",
                vec![("abc", user("", "", &[]))],
                1,
                vec![],
            ),
            (
                "empty token is skipped with a warning",
                ",jane,1\nabc,joe,2\n",
                vec![("abc", user("joe", "2", &[]))],
                1,
                vec!["empty token has been found in token file 'tokens.csv', record number '1'"],
            ),
            (
                "quoted empty token is also empty",
                "abc,joe,2\n\"\",jane,1\n",
                vec![("abc", user("joe", "2", &[]))],
                1,
                vec!["empty token has been found in token file 'tokens.csv', record number '2'"],
            ),
            (
                "duplicate token: the later record wins, with a warning",
                "abc,jane,1,a\ndef,joe,2\nabc,john,3,b\n",
                vec![
                    ("abc", user("john", "3", &["b"])),
                    ("def", user("joe", "2", &[])),
                ],
                2,
                vec![
                    "duplicate token has been found in token file 'tokens.csv', record number '3'",
                ],
            ),
            (
                "record numbers skip blank lines and count skipped empty tokens",
                "\n,x,1\n\nabc,jane,1\nabc,joe,2\n",
                vec![("abc", user("joe", "2", &[]))],
                1,
                vec![
                    "empty token has been found in token file 'tokens.csv', record number '1'",
                    "duplicate token has been found in token file 'tokens.csv', record number '3'",
                ],
            ),
        ];
        for (case, text, want_users, want_len, want_warnings) in cases {
            let (file, warnings) =
                TokenFile::parse(text, "tokens.csv").unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(file.len(), want_len, "{case}");
            assert_eq!(file.is_empty(), want_len == 0, "{case}");
            assert_eq!(warnings, want_warnings, "{case}");
            for (token, want) in want_users {
                assert_eq!(
                    file.authenticate(token),
                    Some(want),
                    "{case}: token {token:?}"
                );
            }
        }
    }

    #[test]
    fn parse_errors() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "two columns",
                "abc,jane\n",
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 2",
            ),
            (
                "one column",
                "abc\n",
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 1",
            ),
            (
                "a comment line is a one-column record",
                "# tokens\nabc,jane,1\n",
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 1",
            ),
            (
                "a whitespace-only line is a one-column record",
                "abc,jane,1\n   \n",
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 1",
            ),
            (
                "the bad record fails the whole file after good ones and warnings",
                "abc,jane,1\nabc,joe,2\n,x,y\ndef,\"a,b\"\n",
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 2",
            ),
        ];
        for (case, text, want) in cases {
            let err = TokenFile::parse(text, "tokens.csv").expect_err(case);
            assert!(
                matches!(err, TokenFileError::TooFewColumns { .. }),
                "{case}"
            );
            assert_eq!(err.to_string(), *want, "{case}");
        }
    }

    #[test]
    fn authenticate_matches_exactly() {
        let (file, _) = TokenFile::parse("Secret-Token,jane,1,dev\n", "t").unwrap();
        assert_eq!(
            file.authenticate("Secret-Token"),
            Some(user("jane", "1", &["dev"]))
        );
        for other in [
            "secret-token",
            "Secret-Token ",
            " Secret-Token",
            "Secret-Toke",
            "Secret-Token2",
            "",
        ] {
            assert_eq!(file.authenticate(other), None, "{other:?}");
        }
    }

    #[test]
    fn tokens_are_stored_as_digests() {
        let (file, _) = TokenFile::parse("Secret-Token,jane,1\n", "t").unwrap();
        let want: TokenDigest = Sha256::digest(b"Secret-Token").into();
        assert_eq!(file.users.keys().copied().collect::<Vec<_>>(), vec![want]);
        let debug = format!("{file:?}");
        assert_eq!(debug, "TokenFile { tokens: 1 }");
    }

    #[test]
    fn non_utf8_token_matches_byte_for_byte() {
        let (file, warnings) = TokenFile::parse_bytes(b"t\xff,j\xffne,1\n", "t").unwrap();
        assert!(warnings.is_empty());
        assert_eq!(
            file.authenticate_bytes(b"t\xff"),
            Some(user("j\u{fffd}ne", "1", &[]))
        );
        assert_eq!(file.authenticate("t\u{fffd}"), None);
    }

    #[test]
    fn load_reads_the_file_and_names_it_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "abc,jane,1,\"dev,ops\"\n,x,y\n").unwrap();
        let (file, warnings) = TokenFile::load(&path).unwrap();
        assert_eq!(
            file.authenticate("abc"),
            Some(user("jane", "1", &["dev", "ops"]))
        );
        assert_eq!(
            warnings,
            vec![format!(
                "empty token has been found in token file '{}', record number '2'",
                path.display()
            )]
        );

        std::fs::write(&path, "abc\n").unwrap();
        let err = TokenFile::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "token file '{}' must have at least 3 columns (token, user name, user uid), found 1",
                path.display()
            )
        );

        let missing = dir.path().join("missing.csv");
        let err = TokenFile::load(&missing).unwrap_err();
        assert!(matches!(err, TokenFileError::Io { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("open {}: ", missing.display())),
            "{err}"
        );
    }
}
