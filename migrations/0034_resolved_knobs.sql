-- The knobs a search that sets none runs with, kept on the collection's row:
-- merging the defaults, the stored values and the domains on every search cost
-- a default search ~0.1 ms. The collections' trigger writes it with the stored
-- values it was merged from (a row written past the trigger is merged at
-- search time again); the function files merge it again on every migrate
-- (sift._refresh_resolved_knobs), and so do changes to sift.knob_defs and
-- sift.knob_presets.
alter table sift.collections add column resolved_knobs sift.knob_set, add column resolved_from jsonb;
comment on column sift.collections.resolved_knobs is
    'The knobs in force when a call sets none (sift._merge_knobs of the stored knobs), kept by the '
    'collection''s trigger; null until the first migrate that fills it.';
comment on column sift.collections.resolved_from is
    'The stored knobs resolved_knobs was merged from: it is used only while they are the row''s.';
