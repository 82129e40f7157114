//! An in-memory disk behind the AOF's `Storage` trait: it remembers how
//! much of each file was synced, so a power cut keeps only that
//! ([`PowerCutDisk::survive_into`]), and it can corrupt what it stores
//! without telling the writer — a flipped bit, a zeroed range — as a
//! failing disk or a torn page does.

use ferrokv_server::persistence::aof::{Storage, StorageFile, SyncHandle};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a [`Fault`] does to the bytes it covers.
#[derive(Debug, Clone, Copy)]
pub enum FaultKind {
    /// XORs the byte at the offset with this mask.
    FlipBits(u8),
    /// Zeroes this many bytes from the offset.
    Zero(usize),
}

/// Silent damage to the file whose name ends with `file_suffix`, at its
/// absolute offset `at`, applied when the bytes there are written.
#[derive(Debug, Clone)]
pub struct Fault {
    pub file_suffix: String,
    pub at: usize,
    pub kind: FaultKind,
}

/// In-memory files (bytes, bytes synced).
#[derive(Default)]
pub struct PowerCutDisk {
    pub files: Mutex<HashMap<PathBuf, (Vec<u8>, usize)>>,
    pub faults: Mutex<Vec<Fault>>,
}

pub struct MemFile {
    disk: Arc<PowerCutDisk>,
    path: PathBuf,
}

struct MemSync {
    disk: Arc<PowerCutDisk>,
    path: PathBuf,
}

impl SyncHandle for MemSync {
    fn sync(&self) -> io::Result<()> {
        let mut f = self.disk.files.lock().unwrap();
        let e = f.get_mut(&self.path).unwrap();
        e.1 = e.0.len();
        Ok(())
    }
}

impl StorageFile for MemFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let faults = self.disk.faults.lock().unwrap().clone();
        let mut files = self.disk.files.lock().unwrap();
        let data = &mut files.get_mut(&self.path).unwrap().0;
        let start = data.len();
        data.extend_from_slice(buf);
        let end = data.len();
        let name = self.path.to_string_lossy();
        for f in faults.iter().filter(|f| name.ends_with(&f.file_suffix)) {
            let (from, to) = match f.kind {
                FaultKind::FlipBits(_) => (f.at, f.at + 1),
                FaultKind::Zero(n) => (f.at, f.at + n),
            };
            let (lo, hi) = (from.max(start), to.min(end));
            if lo < hi {
                for b in &mut data[lo..hi] {
                    *b = match f.kind {
                        FaultKind::FlipBits(m) => *b ^ m,
                        FaultKind::Zero(_) => 0,
                    };
                }
            }
        }
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        MemSync {
            disk: self.disk.clone(),
            path: self.path.clone(),
        }
        .sync()
    }
    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(MemSync {
            disk: self.disk.clone(),
            path: self.path.clone(),
        }))
    }
}

pub struct MemStorage(pub Arc<PowerCutDisk>);

impl Storage for MemStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        self.0
            .files
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), (Vec::new(), 0));
        Ok(Box::new(MemFile {
            disk: self.0.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(MemFile {
            disk: self.0.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.0
            .files
            .lock()
            .unwrap()
            .get(path)
            .map(|f| f.0.clone())
            .ok_or(io::ErrorKind::NotFound.into())
    }
    fn len(&self, path: &Path) -> io::Result<u64> {
        self.read(path).map(|b| b.len() as u64)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut f = self.0.files.lock().unwrap();
        let v = f
            .remove(from)
            .ok_or(io::Error::from(io::ErrorKind::NotFound))?;
        f.insert(to.to_path_buf(), v);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.files.lock().unwrap().remove(path);
        Ok(())
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        if let Some(f) = self.0.files.lock().unwrap().get_mut(path) {
            f.0.truncate(len as usize);
            f.1 = f.1.min(len as usize);
        }
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.files.lock().unwrap().contains_key(path)
    }
    fn create_dir_all(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

impl PowerCutDisk {
    /// What survives the cut, written to `dir/appendonlydir`.
    pub fn survive_into(&self, dir: &Path) {
        for (p, (data, synced)) in self.files.lock().unwrap().iter() {
            let real = dir.join("appendonlydir").join(p.file_name().unwrap());
            std::fs::create_dir_all(real.parent().unwrap()).unwrap();
            std::fs::write(real, &data[..*synced]).unwrap();
        }
    }
}
