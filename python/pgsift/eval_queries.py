"""Every SQL string of golden sets and evaluation (pgsift.golden, pgsift.evaluation).

Kept apart from queries.py (search and writes) but written the same way:
functions called with named arguments, every parameter cast explicitly. The
collection is always looked up through sift._collection(tenant, name), so a
golden set or a run of another tenant is never reachable.
"""

from psycopg import sql

GOLDEN_SET_COLUMNS = (
    "s.golden_set_id, s.name, s.judged_at, s.source, s.description, s.created_at, "
    "(select count(*) from sift.golden_questions q where q.golden_set_id = s.golden_set_id)::int "
    "as questions, "
    "(select count(*) from sift.golden_questions q where q.golden_set_id = s.golden_set_id "
    "and not q.answerable)::int as unanswerable, "
    "(select count(*) from sift.golden_positives p join sift.golden_questions q using (question_id) "
    "where q.golden_set_id = s.golden_set_id)::int as positives, "
    "(select count(*) from sift.golden_positives p join sift.golden_questions q using (question_id) "
    "where q.golden_set_id = s.golden_set_id and p.chunk_id is null)::int as unbound, "
    "(select count(*) from sift.golden_questions q where q.golden_set_id = s.golden_set_id "
    "and q.embedding is null)::int as without_embedding"
)

LIST_GOLDEN_SETS = f"""
select {GOLDEN_SET_COLUMNS}
from sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
join sift.golden_sets s on s.collection_id = c.collection_id
order by s.name, s.golden_set_id
"""

GET_GOLDEN_SET = f"""
select {GOLDEN_SET_COLUMNS}
from sift._golden_set(col => sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text),
                      golden_set => %(name)s::text) s
"""

CREATE_GOLDEN_SET = """
insert into sift.golden_sets (collection_id, name, judged_at, source, description)
select c.collection_id, %(name)s::text, %(judged_at)s::text, %(source)s::text, %(description)s::text
from sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
returning golden_set_id
"""

DELETE_GOLDEN_SET = """
delete from sift.golden_sets s
using sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
where s.collection_id = c.collection_id and s.name = %(name)s::text
returning s.golden_set_id
"""

# The embedding travels as float8[]: pgvector's assignment cast turns it into
# the column's vector wherever the extension lives.
INSERT_QUESTION = """
insert into sift.golden_questions (golden_set_id, question_key, question, answerable, embedding, metadata)
values (%(golden_set_id)s::bigint, %(question_key)s::text, %(question)s::text, %(answerable)s::boolean,
        %(embedding)s::float8[], %(metadata)s::jsonb)
returning question_id
"""

INSERT_POSITIVE = """
insert into sift.golden_positives (question_id, chunk_id, source_uri, content, grade)
values (%(question_id)s::bigint, %(chunk_id)s::bigint, %(source_uri)s::text, %(content)s::text,
        %(grade)s::integer)
"""

# Chunks of the collection by id (a positive given by chunk_id).
CHUNKS_BY_ID = """
select k.chunk_id, k.content, d.source_uri
from sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
join sift.chunks k on k.collection_id = c.collection_id
join sift.documents d on d.document_id = k.document_id
where k.chunk_id = any (%(chunk_ids)s::bigint[])
order by k.chunk_id
"""

# Every chunk of the given documents (a positive given by document only).
CHUNKS_OF_DOCUMENTS = """
select d.source_uri, k.chunk_id, k.content
from sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
join sift.documents d on d.collection_id = c.collection_id
join sift.chunks k on k.document_id = d.document_id
where d.source_uri = any (%(source_uris)s::text[])
order by d.source_uri, k.ordinal, k.chunk_id
"""

REBIND = """
select positive_id, question_key, old_chunk_id, chunk_id, source_uri, status
from sift.rebind_golden_set(collection => %(collection)s::text, golden_set => %(name)s::text,
                            tenant => %(tenant)s::text)
"""

QUESTIONS = """
select q.question_id, q.question_key, q.question, q.answerable, q.embedding::float4[] as embedding,
       q.metadata
from sift.golden_questions q
where q.golden_set_id = %(golden_set_id)s::bigint
order by q.question_id
"""

# Each positive with the document its chunk is in now (source_uri as stored
# when it is unbound).
POSITIVES = """
select p.positive_id, p.question_id, p.chunk_id, coalesce(d.source_uri, p.source_uri) as source_uri,
       p.content, p.grade
from sift.golden_positives p
join sift.golden_questions q on q.question_id = p.question_id
left join sift.chunks k on k.chunk_id = p.chunk_id
left join sift.documents d on d.document_id = k.document_id
where q.golden_set_id = %(golden_set_id)s::bigint
order by p.question_id, p.positive_id
"""

TOKEN_COUNTS = """
select k.chunk_id, coalesce(k.token_count, 0) as token_count
from sift.chunks k
where k.chunk_id = any (%(chunk_ids)s::bigint[])
order by k.chunk_id
"""

INSERT_RUN = """
insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, settings, metrics)
select c.collection_id, %(golden_set_id)s::bigint, %(golden_set)s::text, %(label)s::text,
       %(k)s::integer, %(settings)s::jsonb, %(metrics)s::jsonb
from sift._collection(tenant => %(tenant)s::text, collection => %(collection)s::text) c
returning run_id, created_at
"""

HISTORY = """
select run_id, created_at, set_name, label, k, metrics, settings, previous_run_id, delta
from sift.eval_history(collection => %(collection)s::text, tenant => %(tenant)s::text,
                       golden_set => %(golden_set)s::text, max_runs => %(max_runs)s::integer)
"""

HISTORY_OF_RUNS = """
select run_id, created_at, set_name, label, k, metrics, settings, previous_run_id, delta
from sift.eval_history(collection => %(collection)s::text, tenant => %(tenant)s::text,
                       golden_set => %(golden_set)s::text, max_runs => null::integer)
where run_id = any (%(run_ids)s::bigint[])
"""


def check_knob_values(knob: str) -> sql.Composed:
    """Casts each value (as text) to the knob's domain, so the database range-checks a
    whole sweep before any of it runs. `knob` must be one of evaluation.SWEEP_KNOBS."""
    return sql.SQL("select v::{} from pg_catalog.unnest(%(values)s::text[]) as v").format(
        sql.Identifier("sift", knob))
