/**
 * Turns manifest text into documents: multi-document YAML (JSON is YAML), and `kind: List`
 * expanded into its items. Pure: the caller reads the files and names the source.
 * Text that is one JSON value (a `.json` file, `kubectl get -o json`) goes through
 * JSON.parse first: the YAML parser builds a node tree several times the size of the
 * objects, which dominated `passlb lb`'s memory on large clusters; text JSON.parse refuses
 * falls back to the YAML parser (and its error messages).
 * Decoding the objects is `decode.ts`'s job; here a document is any parsed value.
 */
import { parseAllDocuments } from "yaml";

export interface Document {
  /** file path, or "<stdin>" */
  readonly source: string;
  /** 1-based document number within the source */
  readonly index: number;
  /** 1-based item number when the document was a List */
  readonly item?: number;
  readonly value: unknown;
}

export interface DocumentProblem {
  readonly source: string;
  readonly index: number;
  readonly message: string;
}

export function parseDocuments(
  source: string,
  text: string,
): { documents: Document[]; problems: DocumentProblem[] } {
  const documents: Document[] = [];
  const problems: DocumentProblem[] = [];
  const json = parseJson(text);
  if (json !== undefined) {
    push(documents, source, 1, json.value);
    return { documents, problems };
  }
  const depth = yamlDepthBound(text);
  if (depth > MAX_YAML_DEPTH) {
    problems.push({
      source,
      index: 1,
      message: `not valid YAML/JSON: nested about ${depth} levels deep (more than ${MAX_YAML_DEPTH}); not parsed`,
    });
    return { documents, problems };
  }
  const parsed = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: false });
  const all = Array.isArray(parsed) ? parsed : [parsed];
  let index = 0;
  for (const doc of all) {
    index++;
    const error = doc.errors[0];
    if (error) {
      const line = error.linePos?.[0]?.line;
      const where = line === undefined ? "" : ` (line ${line})`;
      const reason = firstLine(error.message).replace(/ at line \d+, column \d+:?$/, "");
      problems.push({ source, index, message: `not valid YAML/JSON${where}: ${reason}` });
      continue;
    }
    // toJS throws on input, not on a bug: aliases expanding past maxAliasCount (the yaml
    // library's guard against billion-laughs documents, `ToJSOptions.maxAliasCount`), an
    // alias to an anchor defined later. The document is a problem; the others are kept.
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      const reason = /alias count/i.test((e as Error).message)
        ? "YAML aliases expand too far (more than 100 alias uses: a resource exhaustion attack?)"
        : firstLine((e as Error).message);
      problems.push({ source, index, message: `not valid YAML/JSON: ${reason}` });
      continue;
    }
    push(documents, source, index, value);
  }
  return { documents, problems };
}

/**
 * Deeper YAML than this is refused before the parser sees it. The yaml library composes
 * nested nodes recursively: at ~900 nested flow collections or ~1,000 compact block
 * sequences (`- - - …`) it overflows the stack, which it reports as an error — but parsing
 * the same text a second time in that process then ended it with a fatal V8 "RegExpCompiler
 * Allocation failed - process out of memory", which nothing can catch (found by the
 * fuzzer, issue 16; `passlb lb` parses a folder again on every change). Manifests nest a
 * few dozen levels; 200 leaves room.
 */
export const MAX_YAML_DEPTH = 200;

/** An upper bound of a YAML text's nesting: per line, the indentation plus the compact
 * indicators (`- `, `? `, `: `) that open it, plus the flow brackets open at that point
 * (quoted scalars and comments skipped). Overestimates, never underestimates by much. */
export function yamlDepthBound(text: string): number {
  let max = 0;
  let flow = 0;
  for (const line of text.split("\n")) {
    let i = 0;
    while (line[i] === " ") i++;
    let block = i;
    while (/^[-?:][ \t]/.test(line.slice(i, i + 2))) {
      block++;
      i += 2;
      while (line[i] === " " || line[i] === "\t") i++;
    }
    for (; i < line.length; i++) {
      const c = line[i]!;
      if (c === "#" && (i === 0 || line[i - 1] === " ")) break;
      if (c === '"' || c === "'") {
        const end = line.indexOf(c, i + 1);
        i = end < 0 ? line.length : end;
      } else if (c === "[" || c === "{") {
        flow++;
        max = Math.max(max, block + flow);
      } else if ((c === "]" || c === "}") && flow > 0) flow--;
    }
    max = Math.max(max, block + flow);
  }
  return max;
}

function push(documents: Document[], source: string, index: number, value: unknown): void {
  if (value === null || value === undefined) return; // empty document (e.g. a trailing ---)
  if (isList(value)) {
    value.items.forEach((item, i) => {
      documents.push({ source, index, item: i + 1, value: item });
    });
    return;
  }
  documents.push({ source, index, value });
}

/** The value when the whole text is one JSON object or array; undefined otherwise. */
function parseJson(text: string): { value: unknown } | undefined {
  const first = text.trimStart()[0];
  if (first !== "{" && first !== "[") return undefined;
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

function isList(value: unknown): value is { items: unknown[] } {
  if (typeof value !== "object" || value === null) return false;
  const v = value as { kind?: unknown; items?: unknown };
  return typeof v.kind === "string" && v.kind.endsWith("List") && Array.isArray(v.items);
}

function firstLine(message: string): string {
  return message.split("\n")[0] ?? message;
}
