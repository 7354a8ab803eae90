-- name: cuda_api_slowest
-- title: The slowest CUDA API calls
-- description: The single slowest CUDA runtime/driver calls, with their thread and correlation id (to find the
-- description: GPU work they launched or waited for).
-- param: limit int 10 How many calls
-- param: name text null Only calls whose name matches this GLOB pattern (e.g. cudaStreamSynchronize*)
SELECT name,
       start,
       dur AS dur_ns,
       tid,
       pid,
       corr
FROM nsys_runtime
WHERE :name IS NULL OR name GLOB :name
ORDER BY dur DESC, start
LIMIT :limit
