//! Where a component comes from: bytes its caller holds (a binary that carries its
//! components, a download, a test's artifact) or a file its caller names. The embedding builds
//! nothing and remembers no path of the machine that built it.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A component as bytes or as a file, given to [`HarnessOptions`](crate::HarnessOptions),
/// [`DriverHarness::new`](crate::DriverHarness::new) and
/// [`ServeOptions`](crate::serve::ServeOptions).
///
/// `From` makes one from `&'static [u8]` (what `include_bytes!` gives), `Vec<u8>`, `PathBuf`
/// and `&Path`.
#[derive(Clone, PartialEq, Eq)]
pub enum ComponentSource {
    /// The component's bytes.
    Bytes(Cow<'static, [u8]>),
    /// A file read when the harness or server is made.
    File(PathBuf),
}

impl ComponentSource {
    /// The component's bytes: borrowed for [`ComponentSource::Bytes`], read for
    /// [`ComponentSource::File`].
    ///
    /// Fails if the file cannot be read; the error names it.
    pub fn bytes(&self) -> anyhow::Result<Cow<'_, [u8]>> {
        match self {
            ComponentSource::Bytes(bytes) => Ok(Cow::Borrowed(bytes)),
            ComponentSource::File(path) => std::fs::read(path)
                .map(Cow::Owned)
                .with_context(|| format!("could not read the component {}", path.display())),
        }
    }

    /// The file it is read from, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ComponentSource::Bytes(_) => None,
            ComponentSource::File(path) => Some(path),
        }
    }

    /// The name the compiled-code cache files it under: a file's stem, or `name` for bytes.
    pub(crate) fn stem<'a>(&'a self, name: &'a str) -> &'a str {
        self.path()
            .and_then(Path::file_stem)
            .and_then(|stem| stem.to_str())
            .unwrap_or(name)
    }
}

impl fmt::Debug for ComponentSource {
    /// A file by its path, bytes by their count (never the bytes themselves).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::Bytes(bytes) => write!(f, "Bytes({} bytes)", bytes.len()),
            ComponentSource::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl fmt::Display for ComponentSource {
    /// `the component at PATH`, or `the component of N bytes`: for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::Bytes(bytes) => write!(f, "the component of {} bytes", bytes.len()),
            ComponentSource::File(path) => write!(f, "the component at {}", path.display()),
        }
    }
}

impl From<&'static [u8]> for ComponentSource {
    fn from(bytes: &'static [u8]) -> Self {
        ComponentSource::Bytes(Cow::Borrowed(bytes))
    }
}

impl From<Vec<u8>> for ComponentSource {
    fn from(bytes: Vec<u8>) -> Self {
        ComponentSource::Bytes(Cow::Owned(bytes))
    }
}

impl From<PathBuf> for ComponentSource {
    fn from(path: PathBuf) -> Self {
        ComponentSource::File(path)
    }
}

impl From<&Path> for ComponentSource {
    fn from(path: &Path) -> Self {
        ComponentSource::File(path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::ComponentSource;
    use std::path::Path;

    #[test]
    fn bytes_are_borrowed_and_files_are_read_with_their_name_in_the_error() {
        static BYTES: &[u8] = b"\0asm";
        let source = ComponentSource::from(BYTES);
        assert_eq!(&*source.bytes().unwrap(), BYTES);
        assert_eq!(source.path(), None);
        assert_eq!(source.stem("guest"), "guest");
        assert_eq!(format!("{source:?}"), "Bytes(4 bytes)");

        let missing = ComponentSource::from(Path::new("/nonexistent/oma_gateway.wasm"));
        assert_eq!(missing.stem("guest"), "oma_gateway");
        let error = format!("{:#}", missing.bytes().unwrap_err());
        assert!(
            error.starts_with("could not read the component /nonexistent/oma_gateway.wasm"),
            "{error}"
        );
    }
}
