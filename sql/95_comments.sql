-- Every comment on schema sift's tables, columns, composite types (and their attributes) and
-- domains, re-applied with the function files: what psql's \d+, \dT+ and \dD+ say about each.
-- In: the objects, which the migrations make. Out: their comments, as written here. A new table,
-- column, type or domain gets its comment here, not in its migration
-- (tests/test_comments.py::test_every_comment_is_declared_in_sql). Not here: the comments on
-- functions (beside each function), on policies (sql/90_trust.sql), and those on the knobs'
-- attributes of sift.knob_set and their domains (sql/04_knob_table.sql writes each knob's meaning).
--
-- The schema, then the tables in name order, then the composite types in name order (each with
-- its columns or attributes in their order), then the domains in name order.

comment on schema sift is
    'pgsift: hybrid retrieval (pgvector and BM25, fused by weighted RRF) in SQL. Tables, the knob '
    'contract, the composite types the functions return, and the functions.';

comment on table sift.allowed_endpoints is
    'Hosts other than a provider''s own endpoint that rerankers may call, allowed by the operator '
    '(sift.allow_endpoint) for one tenant or for every tenant.';
comment on column sift.allowed_endpoints.endpoint_id is
    'Identity.';
comment on column sift.allowed_endpoints.tenant is
    'The tenant allowed; null: every tenant.';
comment on column sift.allowed_endpoints.url_prefix is
    'What a reranker''s base_url must start with: ending in : admits any port of the host, in / '
    'anything below it; otherwise the URL ends there or goes on with /, :, ? or #.';

comment on table sift.chunk_enrichments is
    'What a language model wrote for a chunk at ingest (pgsift.enrich): a context placing it in its '
    'document and up to 5 questions it answers, kept apart from the chunk''s text; keyed on that text '
    'and the settings, so unchanged text is never sent again. Gone with the chunk.';
comment on column sift.chunk_enrichments.chunk_id is
    'The chunk (sift.chunks).';
comment on column sift.chunk_enrichments.collection_id is
    'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_enrichments.enrichment_key is
    'sha256 of the chunk''s text, its document''s text and the enrichment settings (model, prompt, '
    'what was asked for): the cache key.';
comment on column sift.chunk_enrichments.context is
    'The model''s context for the chunk (null: none written).';
comment on column sift.chunk_enrichments.questions is
    'Questions the chunk answers, as the model wrote them (0 to 5).';
comment on column sift.chunk_enrichments.model is
    'The model that wrote them.';
comment on column sift.chunk_enrichments.created_at is
    'When they were written.';

comment on table sift.chunk_token_sizes is
    'The size of a collection''s token vectors (sift.chunk_tokens): set by its first write, gone when '
    'sift.delete_token_vectors removes the last of them.';
comment on column sift.chunk_token_sizes.collection_id is
    'The collection.';
comment on column sift.chunk_token_sizes.dimensions is
    'Dimensions of every token vector of the collection.';

comment on table sift.chunk_tokens is
    'A chunk''s token vectors for late interaction (MaxSim), written by sift.write_token_vectors or '
    'with its chunk; one size per collection, set by its first write. Gone with the chunk.';
comment on column sift.chunk_tokens.chunk_id is
    'The chunk (sift.chunks).';
comment on column sift.chunk_tokens.collection_id is
    'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_tokens.tokens is
    'One vector per token, in the chunk''s token order, in half precision.';
comment on column sift.chunk_tokens.dimensions is
    'Dimensions of every vector in tokens (the collection''s token size).';
comment on column sift.chunk_tokens.token_count is
    'How many token vectors (1 to 2,048).';
comment on column sift.chunk_tokens.written_at is
    'When they were written.';

comment on table sift.chunk_vectors is
    'A chunk''s vector in an added space (sift.vector_spaces), written by sift.write_space_vectors or, '
    'for the active space, sift.write_chunks.';
comment on column sift.chunk_vectors.space_id is
    'The vector space this vector belongs to.';
comment on column sift.chunk_vectors.chunk_id is
    'The chunk it embeds.';
comment on column sift.chunk_vectors.collection_id is
    'The chunk''s collection, set by trigger, so the dense leg filters by collection inside the index '
    'scan.';
comment on column sift.chunk_vectors.document_id is
    'The chunk''s document, set by trigger, so the metadata filter needs no join through chunks.';
comment on column sift.chunk_vectors.embedding is
    'The chunk''s vector in that space, of its dimensions.';

comment on table sift.chunks is
    'The passages a document is cut into, each a search result: its text, context header, vector in '
    'the built-in space and the tsvector the lexical leg matches. Text is never rewritten: replace the '
    'document instead.';
comment on column sift.chunks.chunk_id is
    'Identity; the id every search result, golden positive and cursor names.';
comment on column sift.chunks.document_id is
    'The document it was cut from.';
comment on column sift.chunks.collection_id is
    'The document''s collection, set by trigger, so both legs filter by collection without a join.';
comment on column sift.chunks.ordinal is
    'Its place in the document, 0-based and unique per document; neighbours windows read by it.';
comment on column sift.chunks.content is
    'The chunk''s text, as returned in hits; never rewritten (SF005).';
comment on column sift.chunks.context is
    'A context header (say, the heading path): indexed at weight B and put before the text a reranker '
    'scores; null: none.';
comment on column sift.chunks.token_count is
    'Tokens in the text as the writer counted them (else about a quarter of its characters); summed '
    'into a hit''s token_count.';
comment on column sift.chunks.embedding is
    'Its vector in the built-in vector space (default); null while the collection''s active space is '
    'an added one (sift.chunk_vectors), or once the built-in space is dropped.';
comment on column sift.chunks.search_vector is
    'The lexical representation, set by trigger: title (weight A), context (B) and text (D), analysed '
    'with the document''s language, CJK and Thai runs as bigrams.';
comment on column sift.chunks.lexical_length is
    'BM25''s document length: the token positions in search_vector.';
comment on column sift.chunks.section_id is
    'The section it was cut from (hierarchical chunking); null: none, and parent_return never merges '
    'it.';

comment on table sift.collection_configs is
    'The text search configurations of a collection''s documents (beside its search_language): the '
    'lexical leg parses a query once with each.';
comment on column sift.collection_configs.collection_id is
    'The collection whose documents use the configuration.';
comment on column sift.collection_configs.config is
    'A text search configuration of one of its documents'' languages; never removed (a stale row costs '
    'one parse per query).';

comment on table sift.collection_lexical_stats is
    'BM25 collection statistics as an append-only ledger: one delta row per statement that writes '
    'chunks, folded into one row per collection by sift.refresh_lexical_stats; readers sum every row, '
    'so statistics are exact with or without a refresh.';
comment on column sift.collection_lexical_stats.collection_id is
    'The collection counted.';
comment on column sift.collection_lexical_stats.chunks is
    'Chunks added (negative: removed) by the statement, or the total in a folded row.';
comment on column sift.collection_lexical_stats.tokens is
    'Their lexical lengths summed (negative: removed); tokens / chunks is BM25''s average length.';
comment on column sift.collection_lexical_stats.deleted is
    'Chunks deleted or re-analysed, cumulative: impact lists are rebuilt once deletions since they '
    'were built pass max_drift.';
comment on column sift.collection_lexical_stats.pending is
    'True for a writer''s delta row; false for the folded row a refresh writes.';
comment on column sift.collection_lexical_stats.lists_min_df is
    'On the row a refresh consolidates: the min_df its impact lists were built under (null on '
    'writers'' rows). A refresh called with another considers every term of the collection again.';
comment on column sift.collection_lexical_stats.lists_min_df_chosen is
    'On the row a refresh consolidates: whether a caller chose lists_min_df (kept by the refreshes '
    'that give none) or the collection''s size did (sift._auto_min_df, taken again at each refresh).';

comment on table sift.collection_locks is
    'One row per collection, locked and never written: the collection''s chunk writers hold it for key '
    'share, a list build (sift.refresh_lexical_stats), a vector space switch or drop and a '
    'collection''s drop for update (sift._lock_collection), so none of these runs while the '
    'collection''s chunks change. Row-level security keeps every tenant to its own rows.';
comment on column sift.collection_locks.collection_id is
    'The collection this row orders the work of.';

comment on table sift.collections is
    'A tenant''s collection of documents: its text search language, embedding size and distance, '
    'reranker and the knob values stored for it. Row-level security: the current tenant''s rows.';
comment on column sift.collections.collection_id is
    'Identity; every row of the collection''s documents, chunks and statistics refers to it.';
comment on column sift.collections.tenant is
    'The tenant that owns it; row-level security admits sift.current_tenant()''s rows only.';
comment on column sift.collections.name is
    'The name searches and the client use, unique per tenant.';
comment on column sift.collections.search_language is
    'The text search configuration for documents without a language of their own, and for queries '
    '(with each configuration in sift.collection_configs).';
comment on column sift.collections.embedding_dims is
    'The vector size of the active vector space (1-4,000; past 2,000 its HNSW index holds halfvec).';
comment on column sift.collections.distance is
    'The distance of the active vector space: cosine, l2 or inner_product.';
comment on column sift.collections.description is
    'Free text about the collection, for people.';
comment on column sift.collections.knobs is
    'The knob values stored for this collection (absent: the default of sift.knob_defs); a trigger '
    'casts each to its domain before it stores. Set with sift.alter_collection.';
comment on column sift.collections.reranker_alias is
    'The reranker of the same tenant that reranks its searches when the rerank knob is on (null: '
    'none).';
comment on column sift.collections.created_at is
    'When it was created.';
comment on column sift.collections.resolved_knobs is
    'The knobs in force when a call sets none (sift._merge_knobs of the stored knobs), kept by the '
    'collection''s trigger; null until the first migrate that fills it.';
comment on column sift.collections.resolved_from is
    'The stored knobs resolved_knobs was merged from: it is used only while they are the row''s.';
comment on column sift.collections.ceilings is
    'Its tenant''s ceilings in force (sift.tenant_limits, the default row under the tenant''s): knob '
    'names, match_count and call_time_limit; null: none. Kept by the collection''s trigger and written '
    'again whenever the ceilings change.';

comment on table sift.cursor_keys is
    'The secret pagination cursors are signed with (one row). Readable by the owner only; replacing '
    'the key invalidates every cursor issued.';
comment on column sift.cursor_keys.singleton is
    'Always true: the primary key that keeps the table to one row.';
comment on column sift.cursor_keys.key is
    'The secret (at least 32 bytes) cursors are signed with.';
comment on column sift.cursor_keys.created_at is
    'When the key was made.';

comment on table sift.documents is
    'A source document of a collection (a file, a page): its metadata, dates and language; its text is '
    'in its chunks.';
comment on column sift.documents.document_id is
    'Identity.';
comment on column sift.documents.collection_id is
    'The collection it belongs to.';
comment on column sift.documents.source_uri is
    'Where it came from (a path or URL), unique per collection: upserts and deletes name documents by '
    'it.';
comment on column sift.documents.title is
    'Its title, indexed with each chunk''s text at weight A.';
comment on column sift.documents.language is
    'Its language (ISO 639-1, a region suffix ignored): picks the text search configuration of its '
    'chunks (sift.language_configs); null: the collection''s search_language.';
comment on column sift.documents.metadata is
    'A JSON object the metadata filter of every search and delete applies to.';
comment on column sift.documents.created_at is
    'The document''s own creation date, as its source gave it; recency_field created ranks on it.';
comment on column sift.documents.modified_at is
    'The document''s own last-modified date, as its source gave it; recency_field modified ranks on '
    'it.';
comment on column sift.documents.uploaded_at is
    'When pgsift received it; recency_field uploaded ranks on it.';

comment on table sift.enrichment_runs is
    'One row per ingestion of a document with enrichment: what it spent (tokens, cost when the '
    'model''s rates are known) and what went wrong (warnings), readable per document.';
comment on column sift.enrichment_runs.run_id is
    'The run.';
comment on column sift.enrichment_runs.document_id is
    'The document (sift.documents).';
comment on column sift.enrichment_runs.collection_id is
    'The document''s collection (set by the write trigger).';
comment on column sift.enrichment_runs.model is
    'The model called.';
comment on column sift.enrichment_runs.chunks is
    'Chunks of the document.';
comment on column sift.enrichment_runs.enriched is
    'Chunks the model wrote for in this run.';
comment on column sift.enrichment_runs.reused is
    'Chunks whose enrichment was reused (unchanged text and settings): no call.';
comment on column sift.enrichment_runs.failed is
    'Chunks whose call failed (they keep only the deterministic header).';
comment on column sift.enrichment_runs.skipped is
    'Chunks past the document''s token budget (not sent).';
comment on column sift.enrichment_runs.input_tokens is
    'Input tokens the provider reported.';
comment on column sift.enrichment_runs.output_tokens is
    'Output tokens the provider reported.';
comment on column sift.enrichment_runs.cost_usd is
    'What those tokens cost at the model''s rates (null: cannot price).';
comment on column sift.enrichment_runs.warnings is
    'What went wrong, one line each (failed calls, malformed output, budget).';
comment on column sift.enrichment_runs.created_at is
    'When the run wrote.';

comment on table sift.eval_runs is
    'The history of evaluation runs: what a golden set scored at k with which settings; '
    'sift.eval_history gives each run''s delta against the previous one.';
comment on column sift.eval_runs.run_id is
    'Identity, in run order.';
comment on column sift.eval_runs.collection_id is
    'The collection searched.';
comment on column sift.eval_runs.golden_set_id is
    'The golden set scored, one of the run''s collection; null once it is deleted (the name stays in '
    'golden_set).';
comment on column sift.eval_runs.golden_set is
    'The set''s name, kept so a re-imported set keeps its history.';
comment on column sift.eval_runs.label is
    'What ran: pipeline, a baseline (dense, lexical) or sweep <knob>=<value>.';
comment on column sift.eval_runs.k is
    'The cut-off the metrics are at (top_k).';
comment on column sift.eval_runs.settings is
    'How it ran: mode, the knobs given and every knob in force, embeddings, question counts, pgsift '
    'version.';
comment on column sift.eval_runs.metrics is
    'The scores: hit rate, MRR, nDCG, precision and recall at k, mean tokens and results, and the '
    'like.';
comment on column sift.eval_runs.created_at is
    'When it ran.';

comment on table sift.golden_positives is
    'A passage that answers a golden question, kept as text as well as chunk, so '
    'sift.rebind_golden_set finds the chunk that holds it after a re-chunk.';
comment on column sift.golden_positives.positive_id is
    'Identity.';
comment on column sift.golden_positives.question_id is
    'The question it answers.';
comment on column sift.golden_positives.chunk_id is
    'The chunk that holds the text, one of the golden set''s collection; null when none does any more '
    'or the binding was ambiguous (it then counts as relevant and never found).';
comment on column sift.golden_positives.source_uri is
    'The document it is in, when known; rebinding prefers a chunk of that document.';
comment on column sift.golden_positives.content is
    'The answering text, verbatim as it appears in the chunk.';
comment on column sift.golden_positives.grade is
    'Its relevance grade (1-100, default 1), the gain nDCG counts.';
comment on column sift.golden_positives.whole_document is
    'True for a positive given by its document alone (source_uri): one row per chunk of that document, '
    'which sift.rebind_golden_set re-makes from the chunks the document has now; false for one given '
    'by text or by chunk (rebound by its text).';

comment on table sift.golden_questions is
    'A question of a golden set: its text, whether the collection answers it, and optionally its query '
    'vector.';
comment on column sift.golden_questions.question_id is
    'Identity.';
comment on column sift.golden_questions.golden_set_id is
    'The set it belongs to.';
comment on column sift.golden_questions.question_key is
    'The question''s id in its source (the JSONL id, the BEIR query id), unique per set.';
comment on column sift.golden_questions.question is
    'The question as a user would ask it; eval searches with it.';
comment on column sift.golden_questions.answerable is
    'False: the collection holds no answer, the question has no positive, and eval counts it declined '
    'when it gets no result.';
comment on column sift.golden_questions.embedding is
    'The query vector when it came with the set; null: the client embeds the question.';
comment on column sift.golden_questions.metadata is
    'Other fields of the question from its source, kept as given.';

comment on table sift.golden_sets is
    'A named set of labelled questions for one collection, which pgsift eval scores searches against.';
comment on column sift.golden_sets.golden_set_id is
    'Identity.';
comment on column sift.golden_sets.collection_id is
    'The collection its questions are asked of.';
comment on column sift.golden_sets.name is
    'Its name, unique per collection.';
comment on column sift.golden_sets.judged_at is
    'chunk: a hit counts when it is a positive''s chunk; document: when it is a chunk of a positive''s '
    'document, once per document (BEIR judgments).';
comment on column sift.golden_sets.source is
    'Where the set came from, in words (a file, a BEIR dataset and split); null: not said.';
comment on column sift.golden_sets.description is
    'Free text about the set, for people.';
comment on column sift.golden_sets.created_at is
    'When it was imported.';

comment on table sift.index_requests is
    'HNSW indexes a tenant''s collections or vector spaces need and the operator builds '
    '(sift.ensure_dense_indexes): one row per tenant and shape, kept once built so that the shapes a '
    'tenant caused stay counted against its max_index_shapes (sift.tenant_limits).';
comment on column sift.index_requests.request_id is
    'Identity of the request.';
comment on column sift.index_requests.tenant is
    'The tenant whose collection or space needs the index.';
comment on column sift.index_requests.dimensions is
    'The embedding size the index holds (its shape, with distance).';
comment on column sift.index_requests.distance is
    'The distance the index orders by: cosine, l2 or inner_product.';
comment on column sift.index_requests.builtin is
    'True: a built-in space (the index on sift.chunks too); false: an added space (sift.chunk_vectors '
    'and sift.question_vectors only).';
comment on column sift.index_requests.requested_by is
    'The role that caused the request.';
comment on column sift.index_requests.requested_at is
    'When the request was made.';
comment on column sift.index_requests.built_at is
    'When the operator''s build found the indexes in place; null while the request waits (the '
    'collection is searched by exact scan meanwhile).';

comment on table sift.knob_defs is
    'The knobs: one row each, with its type (a domain whose CHECK names it), default, what JSON null '
    'means, who may set it and the stage that reads it. sift.knobs() reads it.';
comment on column sift.knob_defs.name is
    'The knob''s name, as given in knobs jsonb; also its sift.knob_set attribute.';
comment on column sift.knob_defs.type is
    'The type every value is cast to: a domain (its CHECK names the knob), or boolean.';
comment on column sift.knob_defs.default_value is
    'The value in force when neither the collection nor the call sets it (JSON null: off unless set).';
comment on column sift.knob_defs.can_be_off is
    'Whether JSON null may switch the knob off (else null is SF009).';
comment on column sift.knob_defs.off_value is
    'The value null stands for when the knob is switched off.';
comment on column sift.knob_defs.scope is
    'collection: stored per collection only (an owner''s limit); call: per call only; both: stored, '
    'and overridden per call.';
comment on column sift.knob_defs.stage is
    'The stage that reads it: write, dense, lexical, fusion, finalize or rerank.';
comment on column sift.knob_defs.meaning is
    'What the knob does; also the comment on its sift.knob_set attribute and domain.';
comment on column sift.knob_defs.position is
    'Its place in listings: sift.knobs() orders by it.';

comment on table sift.knob_presets is
    'Named sets of knob values: knobs => ''{"preset": "pgvector"}'' applies one before the keys given '
    'beside it.';
comment on column sift.knob_presets.name is
    'The name given as "preset".';
comment on column sift.knob_presets.knobs is
    'The knob values it sets (JSON null: off).';
comment on column sift.knob_presets.meaning is
    'What it is for.';

comment on table sift.language_configs is
    'A document language (ISO 639-1) -> the text search configuration its chunks are analysed with; a '
    'language without a row is analysed with simple. The operator may add rows.';
comment on column sift.language_configs.code is
    'An ISO 639-1 (or 639-2) language code, lower case.';
comment on column sift.language_configs.config is
    'The text search configuration documents in that language are analysed with.';

comment on table sift.list_build_entries is
    'Work table of sift.refresh_lexical_stats (unlogged, emptied when the refresh ends): the candidate '
    'entries of the planned lists, before the best are cut into blocks.';
comment on column sift.list_build_entries.collection_id is
    'The collection refreshed.';
comment on column sift.list_build_entries.lexeme is
    'The term of the planned list.';
comment on column sift.list_build_entries.chunk_id is
    'A chunk that holds the term.';
comment on column sift.list_build_entries.tf is
    'Its frequency of the term.';
comment on column sift.list_build_entries.dl is
    'Its lexical_length.';

comment on table sift.list_build_plan is
    'Work table of sift.refresh_lexical_stats (unlogged, emptied when the refresh ends): the impact '
    'lists to build, with the reference each is built at (a merge, sift._merge_deltas, needs none).';
comment on column sift.list_build_plan.collection_id is
    'The collection refreshed.';
comment on column sift.list_build_plan.lexeme is
    'The term whose list is built.';
comment on column sift.list_build_plan.size is
    'The most chunks the list may hold.';
comment on column sift.list_build_plan.floor_min is
    'The lowest impact an entry may have: 0 or a sampled cutoff; the new floor is at least this.';
comment on column sift.list_build_plan.avgdl_ref is
    'The average chunk length the list is built at.';
comment on column sift.list_build_plan.k1_ref is
    'The bm25_k1 the list is built at.';
comment on column sift.list_build_plan.b_ref is
    'The bm25_b the list is built at.';
comment on column sift.list_build_plan.chunks_ref is
    'Live chunks in the collection, recorded with the list.';
comment on column sift.list_build_plan.deleted_ref is
    'The collection''s deletion count, recorded with the list.';

comment on table sift.operator_locks is
    'Rows locked by the operator''s own upkeep, never written: no role but the owner may read or lock '
    'them (no grant). clean_text_index: one cleaner of the text index at a time '
    '(sift._clean_text_index, which skips while another holds it).';
comment on column sift.operator_locks.name is
    'The upkeep step the row orders.';

comment on table sift.question_vectors is
    'The vector of a question a model wrote for a chunk (sift.chunk_enrichments.questions[ordinal + '
    '1]), in the collection''s active space: the dense leg searches them with the chunks'' own '
    'vectors. Gone with the chunk.';
comment on column sift.question_vectors.chunk_id is
    'The chunk the question is about.';
comment on column sift.question_vectors.ordinal is
    'Which of its questions (0-based).';
comment on column sift.question_vectors.collection_id is
    'The chunk''s collection (set by the write trigger).';
comment on column sift.question_vectors.embedding is
    'The question''s vector, in the collection''s active space.';

comment on table sift.rerank_prices is
    'What a rerank call costs, per provider and model (''*'': the provider''s other models), from '
    'effective_from on: a price change is a new row, so the past keeps its price. A usage row is '
    'priced when it is written, by the row in effect at its created_at (the model''s own, else the '
    'provider''s ''*''). Edited by the operator; every tenant may read it. Shipped empty.';
comment on column sift.rerank_prices.price_id is
    'Identity of the price (sift.rerank_usage.price_id).';
comment on column sift.rerank_prices.provider is
    'The provider (a row of sift.reranker_providers).';
comment on column sift.rerank_prices.model is
    'The model, as sift.rerank_usage.model names it; ''*'': any model of the provider without a price '
    'of its own in effect.';
comment on column sift.rerank_prices.effective_from is
    'When the price takes effect (''-infinity'': always); it holds until a later row of the same '
    'provider and model.';
comment on column sift.rerank_prices.price_per_million_tokens is
    'Price of a million tokens (the tokens a usage row reports: Voyage''s total_tokens, TEI''s '
    'x-compute-tokens); null: not priced by tokens.';
comment on column sift.rerank_prices.price_per_search_unit is
    'Price of one search unit (Cohere''s billed search_units); null: not priced by search units.';
comment on column sift.rerank_prices.currency is
    'ISO 4217 code of the prices (USD, EUR, ...).';
comment on column sift.rerank_prices.source is
    'Where the figure comes from (a pricing page and the day it was read, a contract); free text.';
comment on column sift.rerank_prices.created_at is
    'When the row was written.';

comment on table sift.rerank_usage is
    'Metering: one row per rerank call that left the process. A failed call is recorded as failed and '
    'never as billed.';
comment on column sift.rerank_usage.usage_id is
    'Identity.';
comment on column sift.rerank_usage.tenant is
    'The tenant the call was made for.';
comment on column sift.rerank_usage.reranker_alias is
    'The alias of the reranker called, as it was then (no foreign key: the row outlives the reranker); '
    'null: none was named.';
comment on column sift.rerank_usage.provider is
    'The provider called.';
comment on column sift.rerank_usage.model is
    'The model called.';
comment on column sift.rerank_usage.documents is
    'Documents sent.';
comment on column sift.rerank_usage.tokens is
    'The tokens the provider reported (Voyage total_tokens, Cohere input tokens, TEI '
    'x-compute-tokens); null: none reported.';
comment on column sift.rerank_usage.search_units is
    'Cohere''s billing unit, reported instead of tokens; null for the others.';
comment on column sift.rerank_usage.latency_ms is
    'Wall time of the call, retries included, in milliseconds.';
comment on column sift.rerank_usage.attempts is
    'HTTP attempts made.';
comment on column sift.rerank_usage.ok is
    'Whether the call returned a whole ranking of what it sent (partial or invalid: false).';
comment on column sift.rerank_usage.billed is
    'Whether the call counts as billed: every successful one, never a failed one.';
comment on column sift.rerank_usage.error is
    'Why the call failed (null when ok).';
comment on column sift.rerank_usage.created_at is
    'When it was recorded.';
comment on column sift.rerank_usage.price_id is
    'The price in effect when the call was made (sift.rerank_prices), null when none was; a price that '
    'priced rows cannot be deleted (update it and reprice instead).';
comment on column sift.rerank_usage.cost is
    'What the call cost, priced when the row was written (sift.reprice_rerank_usage prices it again): '
    'tokens / 1e6 x price_per_million_tokens + search_units x price_per_search_unit, 0 for a call not '
    'billed. Null (unpriced, never 0) when no price was in effect, or when a rate of the price needs a '
    'unit the provider did not report.';
comment on column sift.rerank_usage.currency is
    'The currency of cost; null exactly when cost is.';

comment on table sift.reranker_limits is
    'What one rerank request may carry, per provider and model (''*'': the provider''s other models). '
    'The client splits a pool into at most max_requests requests within max_documents and '
    'max_request_tokens, and clips a query or document past max_query_tokens / max_pair_tokens. Null: '
    'no such limit. Edited by the operator.';
comment on column sift.reranker_limits.provider is
    'The provider (sift.reranker_providers).';
comment on column sift.reranker_limits.model is
    'The model, or ''*'' for the provider''s other models.';
comment on column sift.reranker_limits.max_documents is
    'Documents in one request.';
comment on column sift.reranker_limits.max_query_tokens is
    'Tokens of the query (the conversation''s tail and the question); null: no limit.';
comment on column sift.reranker_limits.max_pair_tokens is
    'Tokens of the query plus one document (the model''s context); a longer document is clipped. Null: '
    'no limit.';
comment on column sift.reranker_limits.max_request_tokens is
    'Tokens of a whole request: query tokens x documents + every document''s tokens. Null: no limit.';
comment on column sift.reranker_limits.chars_per_token is
    'How many characters the client counts as one token (lower: safer); CJK and Thai characters count '
    'one each.';
comment on column sift.reranker_limits.max_requests is
    'Requests one search may make; candidates past them keep the fused order.';
comment on column sift.reranker_limits.source is
    'Where the figures come from (a documentation URL, a server flag).';

comment on table sift.reranker_providers is
    'The rerank providers pgsift can call; the Python client has one implementation per row.';
comment on column sift.reranker_providers.provider is
    'The provider''s name (voyage, cohere, tei), as rerankers name it.';
comment on column sift.reranker_providers.default_model is
    'The model a reranker gets when it names none.';
comment on column sift.reranker_providers.needs_secret is
    'A hosted provider that bills an account: a reranker must name a secret_ref.';
comment on column sift.reranker_providers.needs_base_url is
    'No public endpoint (a self-hosted server): a reranker must give base_url.';
comment on column sift.reranker_providers.description is
    'What it is and how the client calls it.';

comment on table sift.rerankers is
    'A tenant''s rerankers, by alias: provider, model, endpoint, where the key is mapped, and the time '
    'limits of a call. No key is stored. Written by sift.register_reranker.';
comment on column sift.rerankers.reranker_id is
    'Identity.';
comment on column sift.rerankers.tenant is
    'The tenant it belongs to.';
comment on column sift.rerankers.alias is
    'Its name, unique per tenant; collections name it (reranker_alias).';
comment on column sift.rerankers.provider is
    'The provider called (sift.reranker_providers).';
comment on column sift.rerankers.model is
    'The provider''s model.';
comment on column sift.rerankers.base_url is
    'The endpoint; null: the provider''s own. Another host only where the operator allowed it '
    '(sift.allowed_endpoints).';
comment on column sift.rerankers.secret_ref is
    'A name the operator maps to this tenant''s key (sift.secret_mappings): never the key itself.';
comment on column sift.rerankers.timeout_ms is
    'One HTTP attempt''s timeout, in milliseconds; at most deadline_ms.';
comment on column sift.rerankers.deadline_ms is
    'The whole rerank of a search, retries included, in milliseconds; past it the search keeps its '
    'fused order.';
comment on column sift.rerankers.max_attempts is
    'HTTP attempts per rerank (timeouts, 429 and 5xx are retried within the deadline).';
comment on column sift.rerankers.context_chars is
    'Characters of conversation context (the last ones) put before the query.';
comment on column sift.rerankers.is_default is
    'The tenant''s default (at most one): it scores a search over collections that name different '
    'rerankers.';
comment on column sift.rerankers.created_at is
    'When it was registered (a re-registration keeps the row).';

comment on table sift.schema_functions is
    'One row: the sha256 of the function files (sql/) last applied; migrate re-applies them when the '
    'shipped files differ.';
comment on column sift.schema_functions.sha256 is
    'The sha256 over the function files and the list of migrations under them.';
comment on column sift.schema_functions.applied_at is
    'When the function files were last applied.';

comment on table sift.schema_migrations is
    'The numbered migrations applied to this database, each once, with the sha256 of its file: a '
    'shipped migration that changed is refused.';
comment on column sift.schema_migrations.version is
    'The migration''s file name without .sql (0001_schema, ...).';
comment on column sift.schema_migrations.sha256 is
    'The sha256 of the file as applied.';
comment on column sift.schema_migrations.applied_at is
    'When it was applied.';

comment on table sift.secret_mappings is
    'The operator''s map from a tenant''s secret_ref to where the key is (sift.map_secret). A tenant '
    'sees its own rows; only the operator writes them.';
comment on column sift.secret_mappings.tenant is
    'The tenant whose rerankers name secret_ref.';
comment on column sift.secret_mappings.secret_ref is
    'The name a reranker gives (sift.rerankers.secret_ref).';
comment on column sift.secret_mappings.source is
    'Where the key is: env:VARIABLE (an environment variable of the client process) or '
    'scheme:reference for the application''s resolver (vault:kv/acme/voyage).';
comment on column sift.secret_mappings.provider is
    'The provider the key is for (sift.reranker_providers), or any: only its rerankers may name '
    'secret_ref. Null (a mapping an upgrade could not place): no reranker may, until the operator maps '
    'it again with sift.map_secret.';
comment on column sift.secret_mappings.endpoints is
    'URL prefixes (as sift.allowed_endpoints'') the key may be sent to besides the provider''s own '
    'endpoint; null: that endpoint only. A reranker with a base_url must also be allowed it.';

comment on table sift.sections is
    'A document''s sections (its heading tree), written with its chunks; each chunk of the '
    'hierarchical strategy points at the section it was cut from (sift.chunks.section_id).';
comment on column sift.sections.section_id is
    'Identity; chunks and hits name it.';
comment on column sift.sections.document_id is
    'The document whose heading tree it is part of.';
comment on column sift.sections.collection_id is
    'The document''s collection, set by trigger, for the row-level policy.';
comment on column sift.sections.ordinal is
    'Its place in the document, 0-based and unique per document.';
comment on column sift.sections.parent_ordinal is
    'The ordinal of the enclosing heading''s section; null at the top level.';
comment on column sift.sections.level is
    'The heading level, 1-6; 0 for the text before the first heading.';
comment on column sift.sections.heading is
    'The heading''s text; null for the text before the first heading.';

comment on table sift.tenant_limits is
    'The operator''s ceilings per tenant (a tenant''s row; the row whose tenant is null, if any, for '
    'every tenant without one, and for each value a tenant''s row leaves null): the knob values and '
    'match_count one call may ask for, its time limit, and the HNSW index shapes a tenant may cause. '
    'Only the operator writes it; a tenant reads its own row and the default.';
comment on column sift.tenant_limits.tenant is
    'The tenant these ceilings are for; null: every tenant without a row of its own (and the value a '
    'tenant''s row leaves null).';
comment on column sift.tenant_limits.knob_ceilings is
    'The most each numeric knob may be, by name ({"fetch_k": 200, "neighbours": 3}): refused above it '
    'in a call or a stored setting (SF015), and a value stored before the ceiling is searched with the '
    'ceiling. A tenant''s object is laid over the default row''s.';
comment on column sift.tenant_limits.max_match_count is
    'The most hits (match_count, a page''s window) one call may ask for; null: no ceiling (1,000).';
comment on column sift.tenant_limits.call_time_limit is
    'How long one search may run: its stages check the time between steps and stop with SF015 past it '
    '(docs/trust.md says what this bounds); null: no limit.';
comment on column sift.tenant_limits.max_index_shapes is
    'How many HNSW index shapes (dimensions and distance without an index) a tenant may cause, built '
    'or waiting; null: the default row''s, else 4.';
comment on column sift.tenant_limits.max_index_requests is
    'How many of those may wait for the operator''s build at once; null: the default row''s, else 2.';

comment on table sift.tenant_locks is
    'One row per tenant that asked for an HNSW index, locked and never written: a tenant''s index '
    'requests take it in turn (sift.index_requests'' trigger), so two cannot both pass its limits. '
    'Row-level security keeps every tenant to its own row.';
comment on column sift.tenant_locks.tenant is
    'The tenant whose index requests this row orders.';

comment on table sift.tenant_roles is
    'Roles whose members act for one tenant, whatever they bind (sift.map_role); only the operator '
    'writes it.';
comment on column sift.tenant_roles.role_name is
    'The role (and, through membership, its members).';
comment on column sift.tenant_roles.tenant is
    'The tenant it acts for.';

comment on table sift.term_blocks is
    'An impact list''s entries in blocks of 100, in impact order: one row per block, its chunks, their '
    'term frequencies and lengths as parallel arrays.';
comment on column sift.term_blocks.collection_id is
    'The collection.';
comment on column sift.term_blocks.lexeme is
    'The term whose list it is part of.';
comment on column sift.term_blocks.block_no is
    'The block''s place in the list, 0 first (the highest impacts).';
comment on column sift.term_blocks.max_impact is
    'The block''s best impact, at the list''s reference: no chunk of a later block scores more.';
comment on column sift.term_blocks.chunk_ids is
    'The chunks of the block, in impact order.';
comment on column sift.term_blocks.tfs is
    'Each chunk''s frequency of the term, in the order of chunk_ids.';
comment on column sift.term_blocks.dls is
    'Each chunk''s lexical_length, in the order of chunk_ids.';

comment on table sift.term_deltas is
    'Chunks written since a list was built that beat its floor: one row per writing statement and '
    'term, read with the list and merged into its blocks by a refresh; deleted with the list '
    '(sift._term_lists_gone).';
comment on column sift.term_deltas.collection_id is
    'The collection.';
comment on column sift.term_deltas.lexeme is
    'The term whose list the chunks join.';
comment on column sift.term_deltas.chunk_ids is
    'The new chunks, by id.';
comment on column sift.term_deltas.tfs is
    'Each chunk''s frequency of the term, in the order of chunk_ids.';
comment on column sift.term_deltas.dls is
    'Each chunk''s lexical_length, in the order of chunk_ids.';

comment on table sift.term_df is
    'BM25 document frequencies as of the last refresh: how many chunks of a collection hold each '
    'lexeme. Pending changes are in sift.term_df_pending.';
comment on column sift.term_df.collection_id is
    'The collection counted.';
comment on column sift.term_df.lexeme is
    'A lexeme of the chunks'' search_vector.';
comment on column sift.term_df.df is
    'The number of chunks that hold it.';

comment on table sift.term_df_pending is
    'Document-frequency deltas not folded yet: per statement that writes chunks, one row per bucket of '
    'the lexemes it changed (sift._pending_bucket), added to sift.term_df by '
    'sift.refresh_lexical_stats; readers add them in, each term from its bucket''s rows.';
comment on column sift.term_df_pending.collection_id is
    'The collection the statement wrote.';
comment on column sift.term_df_pending.lexemes is
    'The lexemes whose counts changed, in no particular order (counts follows it).';
comment on column sift.term_df_pending.counts is
    'Each lexeme''s change in chunk count, in the order of lexemes (negative: chunks removed).';
comment on column sift.term_df_pending.delta_lexemes is
    'The lists (by lexeme) whose deltas this statement added entries to (delta_entries follows it); '
    'null when it added to none (deletions among them).';
comment on column sift.term_df_pending.delta_entries is
    'How many entries the statement added to each delta of delta_lexemes.';
comment on column sift.term_df_pending.bucket is
    'Which lexemes the row holds: those whose sift._pending_bucket is this (a statement writes one row '
    'per bucket it changed), so a search reads only its terms'' rows.';

comment on table sift.term_lists is
    'An impact list per common term (in at least min_df chunks): its best chunks by BM25 term weight, '
    'in sift.term_blocks, so the lexical leg reads a few blocks instead of every chunk that holds the '
    'term. Built by sift.refresh_lexical_stats.';
comment on column sift.term_lists.collection_id is
    'The collection.';
comment on column sift.term_lists.lexeme is
    'The term.';
comment on column sift.term_lists.floor_impact is
    'Every chunk outside the list has an impact of at most this, at the list''s reference avgdl, k1 '
    'and b: the bound for chunks the leg has not read.';
comment on column sift.term_lists.avgdl_ref is
    'The average chunk length the impacts were computed with; the list is rebuilt once the '
    'collection''s has drifted past max_drift.';
comment on column sift.term_lists.k1_ref is
    'The bm25_k1 the impacts were computed with (the collection''s stored value).';
comment on column sift.term_lists.b_ref is
    'The bm25_b the impacts were computed with (the collection''s stored value).';
comment on column sift.term_lists.entries is
    'Chunks in its blocks.';
comment on column sift.term_lists.chunks_ref is
    'Live chunks in the collection when the list was built.';
comment on column sift.term_lists.deleted_ref is
    'The collection''s deletion count when the list was built.';
comment on column sift.term_lists.built_at is
    'When the list was built or last merged.';
comment on column sift.term_lists.delta_entries is
    'Entries waiting in the list''s delta (sift.term_deltas), as folded by sift.refresh_lexical_stats; '
    'the list is merged with them once they reach max(100, a quarter of entries).';
comment on column sift.term_lists.delta_rows is
    'Rows the list''s delta holds (sift.term_deltas: one a write statement that added to it), as folded '
    'by sift.refresh_lexical_stats, which merges them into one row once there are 32.';

comment on table sift.vector_spaces is
    'The embedding spaces of a collection: the built-in one (sift.chunks.embedding) and any added with '
    'sift.add_vector_space (sift.chunk_vectors). The active one is searched and written.';
comment on column sift.vector_spaces.space_id is
    'Identity; sift.chunk_vectors rows refer to it.';
comment on column sift.vector_spaces.collection_id is
    'The collection whose chunks it embeds.';
comment on column sift.vector_spaces.name is
    'Its name within the collection (the built-in one is default); the dense_space knob names it.';
comment on column sift.vector_spaces.dimensions is
    'The size of its vectors (1-4,000).';
comment on column sift.vector_spaces.distance is
    'The distance its index and the dense leg use: cosine, l2 or inner_product.';
comment on column sift.vector_spaces.model is
    'The embedding model its vectors come from, as the writer named it (for people; not checked).';
comment on column sift.vector_spaces.builtin is
    'True for the collection''s built-in space, stored in sift.chunks.embedding rather than '
    'sift.chunk_vectors.';
comment on column sift.vector_spaces.active is
    'True for the one space per collection that searches use and writers fill; '
    'sift.switch_vector_space moves it.';
comment on column sift.vector_spaces.created_at is
    'When it was added.';
comment on column sift.vector_spaces.dense_precision is
    'The HNSW index''s precision: full (vector) or half (halfvec: half the index, candidates re-scored '
    'at full precision; always half past 2,000 dimensions). Vectors are stored in full.';
comment on column sift.vector_spaces.hnsw_m is
    'HNSW m (links per node, 2 to 100) of the space''s own index; null: pgvector''s default, 16.';
comment on column sift.vector_spaces.hnsw_ef_construction is
    'HNSW ef_construction (4 to 1000, at least 2 m) of the space''s own index; null: pgvector''s '
    'default, 64.';

comment on type sift.candidate is
    'A row of the fused pool (sift.candidates): each leg''s rank and raw score and the fused score, '
    'before the ranking knobs.';
comment on column sift.candidate.chunk_id is
    'The chunk.';
comment on column sift.candidate.document_id is
    'Its document.';
comment on column sift.candidate.collection_name is
    'Its collection.';
comment on column sift.candidate.fused_rank is
    'Its place in the fused pool, 1 first (ties: smaller chunk id).';
comment on column sift.candidate.score is
    'The fused score: w/(k + dense_rank) + (1 - w)/(k + lexical_rank), a leg that missed it adding '
    'nothing.';
comment on column sift.candidate.found_by is
    'Which leg retrieved it: dense, lexical or both.';
comment on column sift.candidate.dense_rank is
    'Its rank in the dense leg; null: not retrieved by it.';
comment on column sift.candidate.dense_distance is
    'Its distance to the query vector in the space''s metric (cosine, L2, negative inner product); '
    'null: not retrieved by the dense leg.';
comment on column sift.candidate.lexical_rank is
    'Its rank in the lexical leg; null: not retrieved by it.';
comment on column sift.candidate.lexical_score is
    'Its BM25 (or ts_rank_cd) score in the lexical leg; null: not retrieved by it.';
comment on column sift.candidate.legs is
    'Which legs ran: lexical not for text without terms, dense not without a query vector.';
comment on column sift.candidate.lexical_query is
    'The tsquery the lexical leg ran; null when the text had no searchable terms.';
comment on column sift.candidate.lexical_configs is
    'The text search configurations the query was parsed with.';
comment on column sift.candidate.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores are '
    'exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.candidate.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or was '
    'past late_interaction_top_n.';
comment on column sift.candidate.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s name): '
    '{"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';

comment on type sift.explanation is
    'A row of sift.explain: a candidate of the pool behind a search (or a chunk asked about that no '
    'leg retrieved), what each ranking knob did to it, and whether and why it was cut.';
comment on column sift.explanation.fused_rank is
    'Its place in the fused pool; null for a chunk no leg retrieved.';
comment on column sift.explanation.chunk_id is
    'The chunk.';
comment on column sift.explanation.document_id is
    'Its document.';
comment on column sift.explanation.collection_name is
    'Its collection.';
comment on column sift.explanation.source_uri is
    'Its document''s source_uri.';
comment on column sift.explanation.title is
    'Its document''s title.';
comment on column sift.explanation.ordinal is
    'The chunk''s place in its document.';
comment on column sift.explanation.found_by is
    'Which leg retrieved it: dense, lexical or both; null: neither.';
comment on column sift.explanation.dense_rank is
    'Its rank in the dense leg; null: not retrieved by it.';
comment on column sift.explanation.dense_distance is
    'Its distance to the query vector in the space''s metric, given for a chunk no leg retrieved too.';
comment on column sift.explanation.lexical_rank is
    'Its rank in the lexical leg; null: not retrieved by it.';
comment on column sift.explanation.lexical_score is
    'Its BM25 (or ts_rank_cd) score; null: not retrieved by the lexical leg.';
comment on column sift.explanation.base_score is
    'The fused score the threshold is checked against.';
comment on column sift.explanation.score is
    'The score it ranked by: base_score x recency_factor x boost x language_factor.';
comment on column sift.explanation.kept is
    'Whether it made the result.';
comment on column sift.explanation.cut_by is
    'What cut it: score_threshold, translation, per_document_cap, mmr, match_count, merged, '
    'not_retrieved or rerank_pool (past the pool the reranker scored); null when kept.';
comment on column sift.explanation.reason is
    'The decision in words, with the figures (kept: rank r of n; cut: why).';
comment on column sift.explanation.legs is
    'Which legs ran.';
comment on column sift.explanation.lexical_query is
    'The tsquery the lexical leg ran; null when the text had no searchable terms.';
comment on column sift.explanation.recency_date is
    'The date recency ranked it by; null: recency off or the document has no such date.';
comment on column sift.explanation.recency_factor is
    'What recency multiplied the score by (1: recency off).';
comment on column sift.explanation.boost is
    'Its collection''s boost.';
comment on column sift.explanation.cap_status is
    'The per-document cap''s decision: kept, capped or backfilled; null without a cap.';
comment on column sift.explanation.mmr_similarity is
    'With MMR: its largest cosine similarity to the chunks picked before it.';
comment on column sift.explanation.mmr_penalty is
    'With MMR: (1 - mmr_lambda) x mmr_similarity, taken off its relevance.';
comment on column sift.explanation.final_rank is
    'Its rank in the result; null when cut.';
comment on column sift.explanation.position is
    'The order it is shown in (lost_in_the_middle); null when cut.';
comment on column sift.explanation.threshold_applied is
    'Whether a score threshold applied to this search.';
comment on column sift.explanation.below_threshold is
    'How many candidates the score threshold dropped.';
comment on column sift.explanation.threshold_skipped is
    'A threshold calibrated for a reranker that did not score this pool, and why it was not applied; '
    'null: none.';
comment on column sift.explanation.section_id is
    'The chunk''s section; null: none.';
comment on column sift.explanation.merged is
    'True when the row stands for its whole section (parent_return).';
comment on column sift.explanation.matched_chunk_ids is
    'The passages it took: its own, and those merged into it.';
comment on column sift.explanation.merged_into is
    'For a passage folded into its section (cut_by merged): the chunk id of the hit that took it.';
comment on column sift.explanation.language is
    'Its document''s language (the primary subtag).';
comment on column sift.explanation.language_factor is
    'other_language_weight when its language is not the question''s, else 1.';
comment on column sift.explanation.lexical_configs is
    'The text search configurations the query was parsed with.';
comment on column sift.explanation.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores are '
    'exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.explanation.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or was '
    'past late_interaction_top_n.';
comment on column sift.explanation.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s name): '
    '{"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.explanation.reranker is
    'The reranker a search over these collections reranks the pool with (the collections'' common one, '
    'else the tenant''s default); null when reranking is off.';
comment on column sift.explanation.rerank_score is
    'The rerank score the ranking used for this candidate (the rerank_scores given; the Python client '
    'puts the provider''s score here, as on a hit); null when the view is not reranked or the reranker '
    'did not score it.';
comment on column sift.explanation.rerank_rank is
    'The candidate''s place in the reranked pool (by rerank score, ties by chunk id); null when the '
    'view is not reranked or the candidate was outside the pool the reranker scored.';
comment on column sift.explanation.rerank_status is
    'Whether this view includes the rerank: null (no reranker), "reranked: ..." (ranked on the rerank '
    'scores given), "not reranked: ..." (the fused ranking; a search would rerank it; says how to see '
    'the reranked view) or "refused: ..." (no reranker can run, and why).';

comment on type sift.hit is
    'A search result (sift.search, sift.finalize, sift.search_page): the chunk with its document, its '
    'scores and how each was produced.';
comment on column sift.hit.rank is
    'Its strength, 1 = best.';
comment on column sift.hit.position is
    'The order to show it in; differs from rank only with lost_in_the_middle.';
comment on column sift.hit.chunk_id is
    'The chunk (for a merged section, the passage that stands for it).';
comment on column sift.hit.document_id is
    'Its document.';
comment on column sift.hit.collection_name is
    'Its collection.';
comment on column sift.hit.source_uri is
    'Its document''s source_uri.';
comment on column sift.hit.title is
    'Its document''s title.';
comment on column sift.hit.ordinal is
    'The chunk''s place in its document (a merged section: its first chunk''s).';
comment on column sift.hit.content is
    'The chunk''s text, or the whole section''s when merged.';
comment on column sift.hit.context is
    'The chunk''s context header.';
comment on column sift.hit.metadata is
    'Its document''s metadata.';
comment on column sift.hit.score is
    'What it ranks by: base_score x recency_factor x boost x language_factor.';
comment on column sift.hit.base_score is
    'The relevance score: fused, or the reranker''s (the caller''s) in sift.finalize; the score '
    'threshold applies to it.';
comment on column sift.hit.pool_rank is
    'Its place in the pool finalize ranked (the fused order, or the order the caller gave).';
comment on column sift.hit.found_by is
    'Which leg retrieved it: dense, lexical or both; null from sift.finalize (no leg columns).';
comment on column sift.hit.dense_rank is
    'Its rank in the dense leg; null: not retrieved by it.';
comment on column sift.hit.dense_distance is
    'Its distance to the query vector in the space''s metric; null: not retrieved by the dense leg.';
comment on column sift.hit.lexical_rank is
    'Its rank in the lexical leg; null: not retrieved by it.';
comment on column sift.hit.lexical_score is
    'Its BM25 (or ts_rank_cd) score; null: not retrieved by the lexical leg.';
comment on column sift.hit.legs is
    'Which legs ran.';
comment on column sift.hit.lexical_query is
    'The tsquery the lexical leg ran; null when the text had no searchable terms.';
comment on column sift.hit.recency_factor is
    'What recency multiplied the score by (1: recency off).';
comment on column sift.hit.boost is
    'Its collection''s boost.';
comment on column sift.hit.threshold_applied is
    'Whether a score threshold applied to this search.';
comment on column sift.hit.below_threshold is
    'How many candidates the score threshold dropped.';
comment on column sift.hit.threshold_skipped is
    'A threshold calibrated for a reranker that did not score this pool, and why it was not applied; '
    'null: none.';
comment on column sift.hit.reranker is
    'The reranker the Python client reranks this search with; SQL alone never calls out.';
comment on column sift.hit.rerank_refused is
    'Why no reranker can run although one was asked for; null: none refused.';
comment on column sift.hit.section_id is
    'The chunk''s section; null: none.';
comment on column sift.hit.merged is
    'True when the hit is its whole section (parent_return).';
comment on column sift.hit.chunk_ids is
    'The chunks its content spans: its own, or its section''s when merged.';
comment on column sift.hit.matched_chunk_ids is
    'The passages of the pool it stands for: its own, and those merged into it.';
comment on column sift.hit.token_count is
    'Tokens in its content; null when a chunk''s count is unknown.';
comment on column sift.hit.window_chunk_ids is
    'With neighbours: the chunks of its window, in document order; null when a better hit''s window '
    'holds it (window_of).';
comment on column sift.hit.window_text is
    'With neighbours: the window''s text, the one to hand a model; null when a better hit''s window '
    'holds it (window_of).';
comment on column sift.hit.window_of is
    'With neighbours: the chunk id of the better-ranked hit whose window already holds this one.';
comment on column sift.hit.language is
    'Its document''s language (the primary subtag).';
comment on column sift.hit.language_factor is
    'other_language_weight when its language is not the question''s, else 1.';
comment on column sift.hit.lexical_configs is
    'The text search configurations the query was parsed with.';
comment on column sift.hit.snippet is
    'With snippets: a passage of its text with the query''s matched words marked (** or <mark>); null: '
    'snippets off.';
comment on column sift.hit.cursor is
    'sift.search_page: on a page''s last hit, the signed token for the next page; null elsewhere and '
    'when nothing follows.';
comment on column sift.hit.cursor_end is
    'sift.search_page: why nothing follows, exhausted or window; null otherwise.';
comment on column sift.hit.dense_space is
    'The vector space the dense leg searched; null when it did not run.';
comment on column sift.hit.dense_space_missing is
    'How many of the collection''s chunks that space has no vector for (0 for the active space); null '
    'when the dense leg did not run.';
comment on column sift.hit.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores are '
    'exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.hit.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or was '
    'past late_interaction_top_n.';
comment on column sift.hit.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s name): '
    '{"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';

comment on type sift.knob_set is
    'The resolved knobs of one collection for one call (defaults, then the collection''s values, then '
    'the call''s, each cast to its domain): every stage reads this. One attribute per row of '
    'sift.knob_defs.';

comment on domain sift.distance is
    'A vector distance: cosine, l2 or inner_product (pgvector''s <=>, <-> and <#>).';
comment on domain sift.match_count is
    'The range of match_count, the hits a search returns (0-1,000); the functions check it under the '
    'same constraint name, match_count_valid.';
comment on domain sift.name is
    'A name a user types (tenant, collection, reranker alias, golden set, space): not blank, at most '
    '128 characters, so an index entry always fits.';
comment on domain sift.rerank_attempts is
    'How many HTTP attempts a rerank may make within its deadline (1-5).';
comment on domain sift.rerank_context_chars is
    'How many characters of conversation context go before a reranker''s query, the last ones kept '
    '(0-100,000).';
comment on domain sift.rerank_deadline_ms is
    'A reranker''s deadline for the whole rerank of a search, retries included, in milliseconds '
    '(50-60,000).';
comment on domain sift.rerank_timeout_ms is
    'A reranker''s timeout for one HTTP attempt, in milliseconds (50-60,000).';
