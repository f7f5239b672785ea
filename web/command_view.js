// What a command run runs (a config with "command" in place of a built-in model): its
// argv as one line a shell would read back the same (an argument with a space or a
// shell character quoted), its working_dir and the names of the variables its env
// sets (names only: values may be secrets).
import { h } from './format.js';

export function isCommandRun(run) {
  return Boolean(run && run.config && Array.isArray(run.config.command));
}

// One argument as POSIX sh would take it back: bare when only safe characters, else
// in single quotes (a single quote inside written '\'').
export function shellQuote(arg) {
  const s = String(arg);
  if (s !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(s)) return s;
  return `'${s.replace(/'/g, "'\\''")}'`;
}

export const shellJoin = (argv) => argv.map(shellQuote).join(' ');

// The "Command" card's body for a command run's config.
export function commandFacts(config) {
  const env = Object.keys(config.env || {}).sort();
  const fact = (k, ...v) => h('div', {}, h('dt', {}, k), h('dd', {}, ...v));
  return h('dl', { class: 'command-facts' },
    fact('Command', h('code', { id: 'run-command', class: 'command-line' }, shellJoin(config.command))),
    fact('Working dir', config.working_dir
      ? h('code', { id: 'run-working-dir' }, config.working_dir)
      : h('span', { id: 'run-working-dir', class: 'muted' }, 'the run\'s own directory')),
    fact('Environment', env.length
      ? h('span', { id: 'run-env' }, env.flatMap((k, i) => [i ? ' ' : '', h('code', { class: 'env-name' }, k)]))
      : h('span', { id: 'run-env', class: 'muted' }, 'nothing added')));
}
