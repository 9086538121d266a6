import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonArray, textLiteral } from '../../../src/store/hot-call.js';

/** A JSON input as the PGlite sender inlines it. */
const jsonLiteral = (input: unknown): string => textLiteral(JSON.stringify(input));

describe('textLiteral', () => {
  let db: PGlite;

  beforeAll(async () => {
    db = await PGlite.create();
  });

  afterAll(async () => {
    await db.close();
  });

  const hostile = [
    "it's",
    "'); drop table x; --",
    "back\\slash \\' \\\\",
    'quote " and \\"',
    'é ✓ 𝄞 \u0001 \n \t',
    "E'' $$ $eg$",
  ];

  it.each(hostile)('keeps %j inside the literal, byte for byte', async (text) => {
    const input = { text, nested: { list: [text, 1, null, true] } };
    const [result] = await db.exec(`select ${jsonLiteral(input)}::jsonb as v`);
    expect(result!.rows[0]).toEqual({ v: input });
  });

  it('stays inside the literal when standard_conforming_strings is off', async () => {
    await db.exec('set standard_conforming_strings = off');
    try {
      const input = { text: "\\' or 1=1 --" };
      const [result] = await db.exec(`select ${jsonLiteral(input)}::jsonb as v`);
      expect(result!.rows[0]).toEqual({ v: input });
    } finally {
      await db.exec('set standard_conforming_strings = on');
    }
  });

  it('hands eg_batch every input of a batch apart and byte for byte (json keeps each element as sent)', async () => {
    const inputs = hostile.map((text, i) => JSON.stringify({ text }, null, i % 2));
    const [result] = await db.exec(
      `select array_agg(e.value::text order by e.ordinality) as v
       from json_array_elements(${textLiteral(jsonArray(inputs))}::json) with ordinality as e`,
    );
    expect(result!.rows[0]).toEqual({ v: inputs });
  });
});
