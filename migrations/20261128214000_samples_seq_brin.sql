-- The samples' watermark index as BRIN instead of a B-tree (issue 32). goodput-ofu reads
-- samples by ranges of seq (OfuStore::ReadPage); seq grows as rows are appended, so a block
-- range index of a few pages per range finds a page's rows about as well as the B-tree did,
-- and a new row costs no B-tree insert (measured with COPY of 200,000 rows: 7% less
-- PostgreSQL CPU, 17% less WAL, 7% less disk; docs/scaling.md).
--
-- ON ONLY the parent: partitions created from now on get theirs when they are created
-- (samples_create_partitions). The partitions that exist already get theirs from
-- goodput-ingest's maintenance, built CONCURRENTLY one partition at a time and attached
-- (SampleStore::MigrateSeqIndex); once every partition has it the index is valid and the
-- maintenance drops the B-tree samples_by_seq. Until then both serve ofu's reads.
CREATE INDEX IF NOT EXISTS samples_by_seq_brin ON ONLY samples
  USING brin (seq) WITH (pages_per_range = 16, autosummarize = on);
