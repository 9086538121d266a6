/**
 * Agent data shown to a person (the timeline pages, the CLI) must read as what it is. Invisible
 * format characters (Unicode category Cf: bidi embeddings and overrides such as U+202E, isolates,
 * zero-width spaces and joiners, the BOM, tag characters) can make a held action read differently
 * to the person approving it, so each one is shown as its code point, `[U+202E]`.
 */
const INVISIBLE = /\p{Cf}/gu;

/** `text` with every invisible format character shown as `[U+XXXX]`. */
export function visibleText(text: string): string {
  return text.replace(
    INVISIBLE,
    (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`,
  );
}
