-- name: nvtx_summary
-- title: NVTX ranges by name
-- description: One row per (domain, range name): occurrences, total/mean/min/max duration on the CPU threads that
-- description: pushed them. Nested ranges each count their own time.
-- param: limit int 20 How many rows (the largest total first)
-- param: domain text null Only this NVTX domain ('' is the default domain)
-- param: name text null Only ranges whose name matches this GLOB pattern
SELECT domain,
       name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MIN(dur) AS min_ns,
       MAX(dur) AS max_ns
FROM nsys_nvtx
WHERE (:domain IS NULL OR domain = :domain) AND (:name IS NULL OR name GLOB :name)
GROUP BY domain, name
ORDER BY total_ns DESC, name
LIMIT :limit
