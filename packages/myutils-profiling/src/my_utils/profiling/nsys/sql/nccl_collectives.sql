-- name: nccl_collectives
-- title: Every NCCL collective kernel, numbered per process, device and collective
-- description: One row per communication kernel: its collective (from the kernel name), its sequence number among
-- description: the same collective on the same process and device (the k-th all-reduce of every rank is the same
-- description: collective when all ranks use one communicator), start/end on the export's clock and on the UTC
-- description: epoch (start + the export's epoch offset; null when the export does not anchor its clock).
-- param: limit int 100000 At most this many rows
SELECT k.pid,
       k.device,
       k.stream,
       k.collective,
       ROW_NUMBER() OVER (PARTITION BY k.pid, k.device, k.collective ORDER BY k.start, k.end) AS seq,
       k.start,
       k.end,
       k.dur AS dur_ns,
       k.start + (SELECT epoch_offset_ns FROM nsys_export) AS epoch_start,
       k.end + (SELECT epoch_offset_ns FROM nsys_export) AS epoch_end,
       k.short_name
FROM nsys_kernel k
WHERE k.kind = 'communication'
ORDER BY k.start, k.end
LIMIT :limit
