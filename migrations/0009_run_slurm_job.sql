-- 0009: runs on a Slurm cluster (ddpd serve --executor slurm). Each run is one Slurm
-- job: its id is kept from the moment sbatch gives it (the run is still queued then:
-- it waits in Slurm's queue), so that a restarted server follows the same job again
-- instead of submitting the run twice. NULL for a run of this host or of agents.
ALTER TABLE runs ADD COLUMN slurm_job_id TEXT;
