//! Incremental writeback of a file written front to back (a snapshot, a
//! replica's received payload), as Redis's `rdb_fsync_range` /
//! `rdb-save-incremental-fsync`: every [`STEP`] bytes,
//! `sync_file_range(SYNC_FILE_RANGE_WRITE)` asks the kernel to start
//! writing that range out, without waiting for it. The disk then works
//! while the file is still being produced, the final `fsync` finds little
//! left to flush (a gigabyte of dirty pages would otherwise be flushed at
//! the end, in one stall), and dirty pages do not pile up in the page
//! cache. Purely a hint: a failure here is ignored, the final `fsync`
//! decides durability.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};

/// Bytes between two writeback requests (Redis: 4 MiB on save, 8 MiB on
/// the replica's transfer).
pub const STEP: u64 = 8 << 20;

pub struct Writeback {
    fd: RawFd,
    requested: u64,
    written: u64,
}

impl Writeback {
    /// For `file`, which must outlive this value.
    pub fn new(file: &File) -> Self {
        Writeback {
            fd: file.as_raw_fd(),
            requested: 0,
            written: 0,
        }
    }

    /// Appends `data` to `file` (the one given to [`Writeback::new`]) in
    /// writes of at most [`WRITE_PIECE`] bytes, and requests writeback
    /// every [`STEP`].
    pub fn write_all(&mut self, file: &File, data: &[u8]) -> std::io::Result<()> {
        debug_assert_eq!(file.as_raw_fd(), self.fd);
        write_all_pieces(file, data)?;
        self.wrote(data.len());
        Ok(())
    }

    /// `n` more bytes were appended.
    fn wrote(&mut self, n: usize) {
        self.written += n as u64;
        if self.written - self.requested >= STEP {
            let len = self.written - self.requested;
            // SAFETY: a plain syscall on an fd the caller keeps open; it
            // reads no memory of ours.
            unsafe {
                libc::sync_file_range(
                    self.fd,
                    self.requested as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
            self.requested = self.written;
        }
    }

    /// Bytes whose writeback has been requested.
    pub fn requested(&self) -> u64 {
        self.requested
    }
}

/// Largest `write` of a file written front to back through the page cache.
///
/// The size of a buffered write decides the size of the page-cache folios
/// the kernel allocates for it (large folios, ext4 and others), and
/// allocating large folios can be much slower than small ones: on the
/// development VM (Linux 6.18, ext4, memory returned to the host by free
/// page reporting) `dd` of 512 MiB into a new file after a few idle
/// seconds ran at 335 MB/s with 2 MiB and 4 MiB blocks, 2.3 GB/s with
/// 1 MiB and 4.4-5.1 GB/s with 64-512 KiB blocks; in its slow periods
/// 128-256 KiB writes fall to 0.6-1.2 GB/s too, while 32-64 KiB writes
/// keep 2.8-4.9 GB/s (1 GiB into a new file, two rounds each). Writes of
/// 64 KiB cost ~16,000 syscalls per GiB, a few percent of the copy.
pub const WRITE_PIECE: usize = 64 << 10;

/// `write_all` in pieces of at most [`WRITE_PIECE`] bytes.
fn write_all_pieces(mut file: &File, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    for piece in data.chunks(WRITE_PIECE) {
        file.write_all(piece)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_writeback_every_step_and_never_changes_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = File::create(&path).unwrap();
        let mut wb = Writeback::new(&f);
        let block = vec![0x5au8; 1 << 20];
        for i in 1..=20u64 {
            wb.write_all(&f, &block).unwrap();
            assert_eq!(wb.requested(), (i << 20) / STEP * STEP);
        }
        f.sync_all().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 20 << 20);
        assert!(back.iter().all(|&b| b == 0x5a));
    }
}
