-- The GPU memory a rank's device has in use, from the nccl backend's heartbeats
-- (device-wide, as cudaMemGetInfo reports it), for GET /runs/{id}/ranks.
ALTER TABLE ranks ADD COLUMN gpu_mem_used_bytes INTEGER;
ALTER TABLE ranks ADD COLUMN gpu_mem_total_bytes INTEGER;
