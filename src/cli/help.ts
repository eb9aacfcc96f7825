/**
 * The text of `wnw --help`, `wnw <command> --help` and the usage line a usage error prints,
 * all rendered from the flag table (flags.ts) and the commands' own words (commands.ts).
 */
import { COMMAND_SPECS } from './commands.js';
import { COMMANDS, flagsOf, type Command, type FlagSpec } from './flags.js';

/** `--name VALUE`, or `-h, --help` for a flag with a short form. */
export function flagLabel(f: FlagSpec): string {
  return `${f.short ? `-${f.short}, ` : ''}--${f.name}${f.value !== undefined ? ` ${f.value}` : ''}`;
}

/**
 * `usage: wnw <command> FORM [--flag VALUE] ...`, a line per form: the first lists every flag
 * its form does not name already (`--help` aside, which every command takes).
 */
export function usageLine(command: Command): string {
  const forms = COMMAND_SPECS[command].forms;
  const named = (f: FlagSpec) => new RegExp(`(^|\\s)--${f.name}(\\s|$)`).test(forms[0]);
  const optional = flagsOf(command)
    .filter((f) => f.name !== 'help' && !named(f))
    .map((f) => `[--${f.name}${f.value !== undefined ? ` ${f.value}` : ''}]`);
  const call = (form: string) => `wnw ${command}${form ? ` ${form}` : ''}`;
  return [
    `usage: ${[call(forms[0]), ...optional].join(' ')}`,
    ...forms.slice(1).map((form) => `       ${call(form)}`),
  ].join('\n');
}

const COLUMN = 30;

/** A command's flags, one a line: the label, then the description and its default. */
export function flagList(command: Command): string {
  return flagsOf(command)
    .map((f) => {
      const label = `  ${flagLabel(f)}`;
      const text = `${f.description}${f.default !== undefined ? ` (default: ${f.default})` : ''}`;
      // A label too wide for the column (a policy's list of choices) puts its text on the next line.
      return label.length < COLUMN - 1 ? `${label.padEnd(COLUMN)}${text}` : `${label}\n${' '.repeat(COLUMN)}${text}`;
    })
    .join('\n');
}

/** `wnw <command> --help`: its usage, what it does, its flags. */
export function commandHelp(command: Command): string {
  return `${usageLine(command)}\n\n${COMMAND_SPECS[command].about.join('\n\n')}\n\noptions:\n${flagList(command)}\n`;
}

/**
 * `wnw --help`: the commands, a line each, then transcribe's own help, the command most
 * runs use.
 */
export function topHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.length)) + 2;
  return (
    'usage: wnw COMMAND [ARGUMENTS] [OPTIONS]\n' +
    '       wnw COMMAND --help (or -h) prints its usage and every flag it takes\n\n' +
    `commands:\n${COMMANDS.map((c) => `  ${c.padEnd(width)}${COMMAND_SPECS[c].summary}`).join('\n')}\n\n` +
    'Exit status: 0 done, 1 failed (a line on stderr says why), 2 a usage error; transcribe, ask, batch and ' +
    'calibrate exit 130 when Ctrl-C stops them.\n\n' +
    `${commandHelp('transcribe')}`
  );
}
