-- 0016: a stand-in in this branch only, for the migration numbered 0016 on another
-- branch (drop it when they merge).
SELECT 1;
