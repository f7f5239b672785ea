-- 0017: a stand-in in this branch only, for the migration numbered 0017 on another
-- branch (drop it when they merge).
SELECT 1;
