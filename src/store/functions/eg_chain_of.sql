-- The event chain of an id: the first byte of sha256(UTF-8 id), mod 64. chainOf() in
-- audit-chain.ts computes the same (a test checks both).
--
-- 64 is the number of chains, written as a literal on purpose: it must equal EVENT_CHAINS in
-- audit-chain.ts and the chain_head rows (and check) of migration 0001-initial, and divide 256 (the
-- chain is one hash byte mod 64). Another number of chains needs a new migration for chain_head as
-- well as this file. Why 64: with a gate's 16 pooled connections, two commits in flight share a
-- head row about once in 64; with 16 chains, lock waits on head rows were still measurable at 32
-- clients.
create or replace function eg_chain_of(p_id text) returns int language sql stable as $$
    select get_byte(sha256(convert_to(p_id, 'UTF8')), 0) % 64
  $$;
