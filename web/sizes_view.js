// An elastic run's ranks on its run page: how many it trains on now of its width, and
// each change of size (GET /runs/{id}'s ranks_now and sizes: when, from, to, why, for
// which run). Nothing for a run that is not elastic and never changed size.
import { ago, h } from './format.js';

const elasticRange = (run) => {
  const d = (run.config && run.config.distributed) || {};
  return { width: d.world_size || 1, least: d.min_world_size || 0 };
};

// The facts ([dt, dd]) for the run page's fact list: "Ranks: 2 of 4 (elastic, at least 2)"
// and a list of its changes, newest last.
export function sizesFacts(run) {
  const { width, least } = elasticRange(run);
  const sizes = run.sizes || [];
  const elastic = least > 0 && least < width;
  if (!elastic && !sizes.length) return [];
  const now = run.ranks_now === null || run.ranks_now === undefined ? '—' : String(run.ranks_now);
  const changes = sizes.map((c) => h('li', { class: `size-${c.why}`, title: c.at || '' },
    `${c.why === 'shrink' ? 'shrunk' : 'grown'} ${c.from} → ${c.to} `,
    ...(c.for_run ? ['for ', h('a', { href: `#/runs/${c.for_run}` }, `#${c.for_run}`), ' '] : []),
    ago(c.at)));
  return [h('dt', {}, 'Ranks'), h('dd', { class: 'ranks-now' },
    h('span', {}, `${now} of ${width}${elastic ? ` (elastic, at least ${least})` : ''}`),
    ...(changes.length ? [h('ul', { class: 'size-changes' }, ...changes)] : []))];
}
