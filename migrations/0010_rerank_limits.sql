-- pgsift 0010: rerank limits as data. Each provider documents how much one
-- request may carry (documents, tokens of the query, of a query-document
-- pair, of the whole request); the client splits a pool into requests that
-- fit and clips a document too long for its pair, rather than sending one
-- request the provider refuses (HTTP 400) and losing the rerank.
--
-- A row is a provider's model, or '*' for the provider's other models (the
-- strictest documented figures: a model we do not know is not assumed to
-- allow more). The operator edits rows: a self-hosted TEI server has the
-- limits it was started with (--max-client-batch-size), and a provider that
-- raises a limit is one update away. Tokens are estimated in the client
-- (chars_per_token, CJK characters one token each): no provider tokenizer is
-- available offline, so the estimate is conservative.

create table sift.reranker_limits (
    provider           text not null references sift.reranker_providers,
    model              text not null
                       constraint reranker_limits_model_shape check (btrim(model) <> '' and length(model) <= 200),
    -- Documents in one request.
    max_documents      integer not null
                       constraint reranker_limits_documents check (max_documents between 1 and 100000),
    -- Tokens of the query (the conversation's tail and the question).
    max_query_tokens   integer
                       constraint reranker_limits_query check (max_query_tokens between 1 and 10000000),
    -- Tokens of the query plus one document (the model's context).
    max_pair_tokens    integer
                       constraint reranker_limits_pair check (max_pair_tokens between 2 and 10000000),
    -- Tokens of a whole request: query tokens x documents + every document's tokens.
    max_request_tokens integer
                       constraint reranker_limits_request check (max_request_tokens between 2 and 100000000),
    -- How many characters the client counts as one token (lower: safer).
    chars_per_token    real not null default 3
                       constraint reranker_limits_chars_per_token check (chars_per_token between 1 and 10),
    -- Requests one search may make; candidates past them keep the fused order.
    max_requests       integer not null default 4
                       constraint reranker_limits_requests check (max_requests between 1 and 64),
    source             text not null
                       constraint reranker_limits_source check (btrim(source) <> ''),
    constraint reranker_limits_pkey primary key (provider, model),
    constraint reranker_limits_query_within_pair check (max_query_tokens < max_pair_tokens)
);
comment on table sift.reranker_limits is
    'What one rerank request may carry, per provider and model (''*'': the provider''s other '
    'models). The client splits a pool into at most max_requests requests within max_documents '
    'and max_request_tokens, and clips a query or document past max_query_tokens / '
    'max_pair_tokens. Null: no such limit. Edited by the operator.';

insert into sift.reranker_limits
    (provider, model, max_documents, max_query_tokens, max_pair_tokens, max_request_tokens, source)
values
 ('voyage', 'rerank-2.5', 1000, 8000, 32000, 600000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', 'rerank-2.5-lite', 1000, 8000, 32000, 600000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', 'rerank-2', 1000, 4000, 16000, 600000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', 'rerank-2-lite', 1000, 2000, 8000, 600000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', 'rerank-1', 1000, 2000, 8000, 300000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', 'rerank-lite-1', 1000, 1000, 4000, 300000, 'https://docs.voyageai.com/reference/reranker-api'),
 ('voyage', '*', 1000, 1000, 4000, 300000, 'strictest of https://docs.voyageai.com/reference/reranker-api'),
 -- Cohere: at most 10,000 documents (1,000 recommended), a query of 2,048
 -- tokens; rerank-v3.5 reads 4,096 tokens of a pair (max_tokens_per_doc).
 ('cohere', '*', 1000, 2048, 4096, null, 'https://docs.cohere.com/docs/reranking-best-practices'),
 -- TEI: --max-client-batch-size defaults to 32; cross-encoders read 512 tokens.
 ('tei', '*', 32, null, 512, null, 'text-embeddings-inference --max-client-batch-size (default 32)');

-- sift.reranker_for returns the limits of the reranker it chose (a jsonb
-- row). Re-created by the function files.
drop function if exists sift.reranker_for(text, jsonb, text[], text);
