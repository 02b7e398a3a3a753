-- pgsift 0042: a positive given by its document alone (a source_uri, a BEIR
-- judgment) is about the document, not about the chunks it had when the set
-- was imported. It is still stored as one row per chunk (evaluation scores
-- chunks), now marked, so sift.rebind_golden_set can make it every chunk the
-- document has after a re-chunk, whatever their text, instead of searching
-- for the old chunks' texts. Rows stored before are not marked (nothing tells
-- them from positives given by text): re-import such a set to mark them.

alter table sift.golden_positives
    add column whole_document boolean not null default false,
    add constraint whole_document_has_source check (not whole_document or source_uri is not null);

comment on column sift.golden_positives.whole_document is
    'True for a positive given by its document alone (source_uri): one row per chunk of that '
    'document, which sift.rebind_golden_set re-makes from the chunks the document has now; '
    'false for one given by text or by chunk (rebound by its text).';
