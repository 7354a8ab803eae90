-- name: export_info
-- title: What the export is
-- description: One row: the exporter version and metadata table (META_DATA_EXPORT 2023+, EXPORT_META_DATA
-- description: 2022, none before), the offset that puts its timestamps on the UTC epoch, and how many rows each
-- description: canonical view holds.
SELECT e.label,
       e.rank,
       e.product_version,
       e.schema_version,
       e.family,
       e.epoch_offset_ns,
       (SELECT COUNT(*) FROM nsys_kernel) AS kernels,
       (SELECT COUNT(*) FROM nsys_memcpy) AS memcpys,
       (SELECT COUNT(*) FROM nsys_memset) AS memsets,
       (SELECT COUNT(*) FROM nsys_runtime) AS cuda_api_calls,
       (SELECT COUNT(*) FROM nsys_osrt) AS osrt_calls,
       (SELECT COUNT(*) FROM nsys_nvtx) AS nvtx_ranges,
       (SELECT MIN(start) FROM nsys_gpu_op) AS gpu_start,
       (SELECT MAX(end) FROM nsys_gpu_op) AS gpu_end
FROM nsys_export e
