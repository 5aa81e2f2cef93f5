//! Writing files so that readers see the old contents or the new, never a
//! torn mix.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::TrustError;

/// Writes `contents` to a temporary file beside `path`, syncs it, then
/// renames it over `path` (or, with `no_clobber`, links it into place and
/// fails if `path` exists). The temporary file is removed on every path.
pub(crate) fn write_atomic(
    path: &Path,
    contents: &[u8],
    no_clobber: bool,
) -> Result<(), TrustError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp = dir.join(format!(".{name}.tmp-{}-{nanos:09}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| TrustError::io("create", &temp, e))?;
        file.write_all(contents)
            .and_then(|()| file.sync_all())
            .map_err(|e| TrustError::io("write", &temp, e))?;
        if no_clobber {
            std::fs::hard_link(&temp, path).map_err(|e| TrustError::io("create", path, e))
        } else {
            std::fs::rename(&temp, path).map_err(|e| TrustError::io("replace", path, e))
        }
    })();
    let _ = std::fs::remove_file(&temp);
    result
}
