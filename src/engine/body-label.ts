/**
 * What a governed body's Content-Type says it is, read as narrowly as the narrowest mainstream
 * framework reads it, because a body is only read one way when every destination reads it that
 * way. Laravel's `isJson()` looks for `/json` case-sensitively, Express' `express.json()` takes
 * `application/json` but not `application/vnd.api+json` nor a latin1 charset, Django REST
 * framework refuses `text/plain`, Rails reads an unlabelled body as a form, and Go handlers decode
 * JSON whatever the label. So only these labels are readable: `application/json` (lower case,
 * no charset or UTF-8), `application/x-www-form-urlencoded` and `multipart/form-data` (lower
 * case). Every other label, or none, is `other`: JSON bytes under it are refused
 * (`argument-document.ts`), since some destinations read them as JSON and others not at all —
 * unless a tool on the route declares that its destination reads that type as JSON
 * (`match.json_types`, e.g. Kubernetes' patch types): a destination's own reading, declared.
 */
export type BodyLabel = 'json' | 'form' | 'multipart' | 'other';

const NO_TYPES: ReadonlySet<string> = new Set();

/** Whether a body under `label` is read as named fields (a form or multipart), like a query. */
export function readsAsFields(label: BodyLabel): boolean {
  return label === 'form' || label === 'multipart';
}

export function bodyLabel(
  contentType: string | undefined,
  jsonTypes: ReadonlySet<string> = NO_TYPES,
): BodyLabel {
  if (contentType === undefined) return 'other';
  const semi = contentType.indexOf(';');
  const media = (semi === -1 ? contentType : contentType.slice(0, semi)).trim();
  // A type the route's tool declares its destination reads as JSON (`match.json_types`).
  if (jsonTypes.size > 0 && jsonTypes.has(media.toLowerCase())) return 'json';
  switch (media) {
    case 'application/json': {
      if (semi === -1) return 'json';
      const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType)?.[1]?.toLowerCase();
      return charset === undefined || charset === 'utf-8' || charset === 'utf8' ? 'json' : 'other';
    }
    case 'application/x-www-form-urlencoded':
      return 'form';
    case 'multipart/form-data':
      return 'multipart';
    default:
      return 'other';
  }
}
