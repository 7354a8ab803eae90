-- name: memcpy_summary
-- title: Copy and set volume and achieved bandwidth per direction
-- description: One row per (op, direction): memcpy by CUDA copy kind (HtoD, DtoH, DtoD, PtoP...) and memset.
-- description: bandwidth_gbps = total bytes / total busy time of those operations (GB/s, 1e9 B/s);
-- description: peak_gbps is the fastest single operation; only operations with a duration count for it.
SELECT op,
       direction,
       COUNT(*) AS count,
       SUM(bytes) AS bytes,
       SUM(dur) AS total_ns,
       AVG(bytes) AS mean_bytes,
       1.0 * SUM(bytes) / NULLIF(SUM(dur), 0) AS bandwidth_gbps,
       MAX(CASE WHEN dur > 0 THEN 1.0 * bytes / dur END) AS peak_gbps
FROM (SELECT 'memcpy' AS op, direction, bytes, dur FROM nsys_memcpy
      UNION ALL
      SELECT 'memset', 'device', bytes, dur FROM nsys_memset)
GROUP BY op, direction
ORDER BY total_ns DESC, op, direction
