/**
 * Broken model files from valid ones: JSON files (config.json, tokenizer.json, tekken.json,
 * heads.json, chat templates) lose keys, get values of the wrong type or absurd size, are
 * cut or stop being JSON; safetensors files get cut or huge header lengths (a 2 GB one
 * included), offsets past the end, overlapping tensors, other dtypes and shapes.
 */
import { HOSTILE, flipBytes, type Dice } from './random.js';

type Json = unknown;

/** A random place in a JSON value: the container and the key whose value gets replaced. */
function randomSlot(d: Dice, root: Json): { parent: Record<string, Json> | Json[]; key: string | number } | null {
  let parent: Record<string, Json> | Json[] | null = null;
  let key: string | number = '';
  let node = root;
  for (let depth = 0; depth < 6; depth++) {
    if (Array.isArray(node) && node.length) {
      const i = d.int(0, node.length - 1);
      [parent, key, node] = [node, i, node[i]];
    } else if (node && typeof node === 'object' && Object.keys(node).length) {
      const k = d.pick(Object.keys(node));
      [parent, key, node] = [node as Record<string, Json>, k, (node as Record<string, Json>)[k]];
    } else break;
    if (depth > 0 && d.chance(0.35)) break;
  }
  return parent ? { parent, key } : null;
}

const TEMPLATE_BREAKS = [
  '{%',
  '}}',
  '{% endfor %}',
  '{{ raise_exception("fuzz") }}',
  '{% for x in %}',
  '{{ messages[99]["content"] }}',
  '{{ 1/0 }}',
  '',
  '{% if %}',
];

function mutateString(d: Dice, s: string): string {
  const at = d.int(0, s.length);
  switch (d.int(0, 3)) {
    case 0:
      return s.slice(0, at) + d.pick(TEMPLATE_BREAKS) + s.slice(at);
    case 1:
      return s.slice(0, at) + s.slice(Math.min(s.length, at + d.int(1, 200)));
    case 2:
      return s.slice(0, at);
    default:
      return '\u0000\uffff'.repeat(d.int(1, 4)) + s;
  }
}

/** Mutates one value of a parsed JSON document in place, saying what it did. */
function mutateValue(d: Dice, doc: Json): string {
  const slot = randomSlot(d, doc);
  if (!slot) return 'unchanged';
  const { parent, key } = slot;
  const old = (parent as Record<string, Json>)[key as string];
  const action = d.pick(['delete', 'hostile', 'hostile', 'scale', 'truncate-array', 'string']);
  if (action === 'delete') {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key as string];
    return `deleted ${key}`;
  }
  if (action === 'scale' && typeof old === 'number') {
    const v = d.pick([0, -old, old * 2, old + 1, old - 1, old * 1000, old / 3]);
    (parent as Record<string, Json>)[key as string] = v;
    return `${key}: ${old} -> ${v}`;
  }
  if (action === 'truncate-array' && Array.isArray(old)) {
    old.length = d.int(0, old.length - 1 < 0 ? 0 : old.length - 1);
    return `${key} cut to ${old.length} entries`;
  }
  if (action === 'string' && typeof old === 'string') {
    (parent as Record<string, Json>)[key as string] = mutateString(d, old);
    return `${key}: string broken`;
  }
  const v = d.pick(HOSTILE);
  (parent as Record<string, Json>)[key as string] = v;
  return `${key}: ${JSON.stringify(v)}`;
}

/** A mutated JSON file's new bytes, or null to delete it. */
export function mutateJson(d: Dice, text: string, parsed: Json): { bytes: Uint8Array | null; what: string } {
  const enc = (s: string) => new TextEncoder().encode(s);
  const kind = d.pick([
    'value',
    'value',
    'value',
    'value',
    'values',
    'missing',
    'not-json',
    'cut',
    'empty',
    'wrong-root',
    'nan',
  ]);
  switch (kind) {
    case 'missing':
      return { bytes: null, what: 'file deleted' };
    case 'not-json':
      return { bytes: enc(`<html>${text.slice(0, 50)}`), what: 'not JSON' };
    case 'cut':
      return { bytes: enc(text.slice(0, d.int(0, text.length - 1))), what: 'cut short' };
    case 'empty':
      return { bytes: new Uint8Array(0), what: 'empty' };
    case 'wrong-root':
      return { bytes: enc(JSON.stringify(d.pick([[], 42, 'config', null, [parsed]]))), what: 'root of the wrong type' };
    case 'nan': {
      // JSON has no NaN; a writer that emits Python's NaN/Infinity makes such a file.
      const doc = structuredClone(parsed);
      const slot = randomSlot(d, doc);
      if (slot) (slot.parent as Record<string, Json>)[slot.key as string] = '__NAN__';
      return {
        bytes: enc(JSON.stringify(doc).replace('"__NAN__"', d.pick(['NaN', 'Infinity', '-Infinity']))),
        what: `${String(slot?.key)}: NaN literal`,
      };
    }
    default: {
      const doc = structuredClone(parsed);
      const n = kind === 'values' ? d.int(2, 5) : 1;
      const what = Array.from({ length: n }, () => mutateValue(d, doc)).join('; ');
      return { bytes: enc(JSON.stringify(doc)), what };
    }
  }
}

const DTYPES = ['F32', 'F16', 'BF16', 'I32', 'F64', 'I8', 'U8', 'BOOL', 'F8_E4M3', 'I64', 'xx', '', 7];

/** A mutated safetensors file (header length, header JSON, tensor entries, data). */
export function mutateSafetensors(d: Dice, bytes: Uint8Array): { bytes: Uint8Array | null; what: string } {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(v.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<
    string,
    { dtype: unknown; shape: unknown; data_offsets: unknown }
  >;
  const data = bytes.subarray(8 + n);
  const names = Object.keys(header).filter((k) => k !== '__metadata__');
  const name = d.pick(names);
  const t = header[name];
  const [b0, e0] = t.data_offsets as [number, number];
  const kind = d.pick([
    'length',
    'length',
    'cut',
    'offsets',
    'overlap',
    'dtype',
    'shape',
    'shape',
    'delete',
    'header-bytes',
    'data-bytes',
    'missing',
  ]);
  const rebuild = () => {
    const h = new TextEncoder().encode(JSON.stringify(header));
    const out = new Uint8Array(8 + h.length + data.length);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(h, 8);
    out.set(data, 8 + h.length);
    return out;
  };
  switch (kind) {
    case 'length': {
      const out = bytes.slice();
      const len = d.pick([
        0n,
        1n,
        7n,
        2n ** 31n,
        2n ** 32n + 8n,
        2n ** 63n,
        2n ** 64n - 1n,
        BigInt(n + 1),
        BigInt(n - 1),
      ]);
      new DataView(out.buffer).setBigUint64(0, len, true);
      return { bytes: out, what: `header length ${len}` };
    }
    case 'cut': {
      const at = d.pick([0, 4, 8, 8 + d.int(0, n), d.int(8 + n, bytes.length - 1)]);
      return { bytes: bytes.slice(0, at), what: `cut at byte ${at} of ${bytes.length}` };
    }
    case 'offsets':
      t.data_offsets = d.pick([
        [b0, data.length + d.int(1, 1e6)],
        [e0, b0],
        [-4, e0],
        [b0, 2 ** 53],
        'x',
        [b0],
        null,
        [b0 + 0.5, e0],
      ]);
      return { bytes: rebuild(), what: `${name}: data_offsets ${JSON.stringify(t.data_offsets)}` };
    case 'overlap': {
      const other = header[d.pick(names)];
      const [ob, oe] = other.data_offsets as [number, number];
      t.data_offsets = [ob, ob + (e0 - b0)];
      const overlapping = oe > ob;
      return { bytes: rebuild(), what: `${name}: offsets overlap another tensor's${overlapping ? '' : ' (empty)'}` };
    }
    case 'dtype':
      t.dtype = d.pick(DTYPES);
      return { bytes: rebuild(), what: `${name}: dtype ${JSON.stringify(t.dtype)}` };
    case 'shape': {
      const shape = (t.shape as number[]).slice();
      const choice = d.int(0, 4);
      if (choice === 0 && shape.length) shape[d.int(0, shape.length - 1)] += d.pick([-1, 1, 8]);
      else if (choice === 1) shape.reverse();
      else if (choice === 2) shape.push(1);
      else if (choice === 3 && shape.length) shape[0] = d.pick([0, -1, 2 ** 40]);
      t.shape = choice === 4 ? d.pick([null, 'x', [NaN], []]) : shape;
      return { bytes: rebuild(), what: `${name}: shape ${JSON.stringify(t.shape)}` };
    }
    case 'delete':
      delete header[name];
      return { bytes: rebuild(), what: `${name} removed` };
    case 'header-bytes':
      return { bytes: flipBytes(d, bytes, d.int(1, 6), 8), what: 'header bytes flipped' };
    case 'data-bytes': {
      const out = bytes.slice();
      // NaN and Inf weights: a transcript of garbage is fine, a crash is not.
      for (let i = 8 + n; i + 4 <= out.length; i += 4 * d.int(1, 5000)) out.set([0, 0, 0xc0, 0x7f], i);
      return { bytes: out, what: 'NaN weights' };
    }
    default:
      return { bytes: null, what: 'file deleted' };
  }
}
