#!/bin/sh
# Regenerates src/sys.rs from the libfabric 1.x headers (Debian: libfabric-dev 1.17).
# Needs bindgen-cli 0.72 (`cargo install bindgen-cli --version 0.72.1 --locked`) and libclang
# (`apt-get install libclang-dev`) -- only here, never to build ferrokv.
# Run from crates/fabric:  sh bindgen/regenerate.sh
set -eu
out=src/sys.rs
{
  echo '//! Layouts of the libfabric 1.x structs, ops tables and constants, generated once by bindgen and committed.'
  echo '//!'
  echo '//! Regenerate (from crates/fabric, needs bindgen-cli 0.72 + libclang + libfabric-dev): `sh bindgen/regenerate.sh`'
  echo '//! Generated from libfabric-dev 1.17.0 headers with the allowlist in bindgen/regenerate.sh; do not edit by hand.'
  echo '#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, clippy::all, missing_docs)]'
  echo
  bindgen bindgen/wrapper.h \
    --no-doc-comments --no-layout-tests --no-prepend-enum-name \
    --default-enum-style consts \
    --allowlist-type 'fi_info|fi_tx_attr|fi_rx_attr|fi_ep_attr|fi_domain_attr|fi_fabric_attr' \
    --allowlist-type 'fid|fi_ops|fi_ops_fabric|fid_fabric|fi_ops_domain|fi_ops_mr|fid_domain|fid_mr' \
    --allowlist-type 'fi_ops_ep|fi_ops_cm|fi_ops_msg|fi_ops_rma|fid_ep|fid_pep' \
    --allowlist-type 'fi_eq_attr|fi_ops_eq|fid_eq|fi_eq_entry|fi_eq_cm_entry|fi_eq_err_entry' \
    --allowlist-type 'fi_cq_attr|fi_ops_cq|fid_cq|fi_cq_data_entry|fi_cq_err_entry|fi_context2' \
    --allowlist-var 'FI_.*' \
    --opaque-type 'fid_nic|fid_av|fid_wait|fid_poll|fid_cntr|fid_stx|fid_mc|fi_ops_tagged|fi_ops_atomic|fi_ops_collective' \
    --opaque-type 'fi_poll_attr|fi_atomic_attr|fi_cntr_attr|fi_collective_attr|fi_wait_attr|fi_av_attr|fi_mr_attr|fi_msg|fi_msg_rma|fi_rma_ioc|fi_av_set_attr' \
    -- -I/usr/include
} > "$out.tmp"
mv "$out.tmp" "$out"
rustfmt --edition 2021 "$out"
