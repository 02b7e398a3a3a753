-- pgsift 0011: stable pagination. sift.search_page cuts pages from one
-- ranking of the first page_window hits (fused, capped, diversified once,
-- over the whole window), and every hit carries a cursor: an opaque token
-- naming the request and the chunks already served, signed with a key no
-- tenant can read, so the next page continues after that hit (no row twice,
-- none skipped) and a cursor from another query, collection or tenant, or
-- one altered, is refused (SF012).

create domain sift.page_window as integer
    constraint page_window_range check (value between 1 and 1000);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (211, 'page_window', 'sift.page_window', '100', false, 'null', 'both', 'finalize',
  'Hits the pages of sift.search_page are cut from: one ranking of this many, so page 2 continues '
  'page 1; past it, the last hit says cursor_end = window.');

alter type sift.knob_set add attribute page_window sift.page_window;

alter type sift.hit
    add attribute cursor text,
    add attribute cursor_end text;

-- The key cursors are signed with: one row, readable by no tenant (only the
-- signing function, which runs as its owner, reads it).
create table sift.cursor_keys (
    singleton  boolean primary key default true constraint cursor_keys_one_row check (singleton),
    key        bytea not null constraint cursor_keys_key_length check (length(key) >= 32),
    created_at timestamptz not null default now()
);
comment on table sift.cursor_keys is
    'The secret pagination cursors are signed with (one row). Readable by the owner only; '
    'replacing the key invalidates every cursor issued.';
insert into sift.cursor_keys (key)
select decode(replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex');
