-- pgsift 0006: a collection's score threshold remembers the reranker it was
-- calibrated for (`pgsift calibrate`).
--
-- A threshold is on the scale of whatever scored the pool: a reranker's
-- scores, or the fused (RRF) scores without one. A value tuned on one
-- reranker's scores means nothing on another's, nor on fused scores, so
-- score_threshold_reranker names the alias the stored score_threshold was
-- calibrated for (null: not calibrated for a reranker, applied as it is).
-- The client skips a threshold calibrated for another reranker than the one
-- that scored the pool, and says so (SearchResult.threshold_skipped);
-- sql/86_calibration.sql clears it when the collection's reranker changes.

alter table sift.collections
    add column score_threshold_reranker text
        constraint score_threshold_reranker_not_blank check (btrim(score_threshold_reranker) <> '');

comment on column sift.collections.score_threshold_reranker is
    'The reranker alias the stored score_threshold was calibrated for (sift.store_calibrated_threshold); '
    'null: not calibrated for a reranker.';
