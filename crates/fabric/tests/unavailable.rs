//! Without libfabric the crate must say so cleanly — "RDMA unavailable: …" — so the server can
//! fall back to TCP. Needs no libfabric: runs everywhere.

use ferrokv_fabric::{FabricError, Library, LIBRARY_ENV};

#[test]
fn library_path_pointing_to_nothing_reports_rdma_unavailable() {
    let err = Library::open("/nonexistent/ferrokv/libfabric.so.1").unwrap_err();
    assert!(matches!(err, FabricError::Unavailable(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("RDMA unavailable: cannot load /nonexistent/ferrokv/libfabric.so.1"),
        "{text}"
    );

    // The same through the environment override the server uses.
    std::env::set_var(LIBRARY_ENV, "/nonexistent/ferrokv/libfabric.so.1");
    let err = Library::open_default().unwrap_err();
    std::env::remove_var(LIBRARY_ENV);
    assert!(err.to_string().starts_with("RDMA unavailable: "), "{err}");
}

#[test]
fn a_library_that_is_not_libfabric_reports_rdma_unavailable() {
    let err = Library::open("libc.so.6").unwrap_err();
    assert!(matches!(err, FabricError::Unavailable(_)), "{err:?}");
    assert!(
        err.to_string().contains("has no symbol fi_version"),
        "{err}"
    );
}
