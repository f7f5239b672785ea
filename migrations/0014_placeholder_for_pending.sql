-- 0014: a placeholder, holding the number given to the pending-reasons branch (issue
-- 47), so that this branch's 0015 applies; it changes nothing. Merging that branch
-- replaces this file with its own 0014.
SELECT 1;
