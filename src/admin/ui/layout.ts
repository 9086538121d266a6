/**
 * The frame of every admin page: inline CSS (the CSP allows no other), a header with the
 * navigation and the logout form. No script: the pages read and work without JavaScript.
 */
import type { OperationState } from '../../store/index.js';
import { type Fragment, html, type SafeHtml, unsafeRawHtml } from './html.js';

const CSS = `
:root{--fg:#1d2330;--muted:#5c6577;--line:#dde1e8;--bg:#f6f7f9;--card:#fff;--link:#1a56b8;
--ok:#17603a;--ok-bg:#e5f4ea;--bad:#a12622;--bad-bg:#fdeceb;--warn:#7a4b00;--warn-bg:#fff3d1;--info:#1a4fa0;--info-bg:#e8f0fe}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
a{color:var(--link)}
code,.mono{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace;font-size:.88em}
.wrap{overflow-wrap:break-word;min-width:0}
.wrap-any{overflow-wrap:anywhere}
td .id{display:inline-block;min-width:9rem}
header.top{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.5rem;background:#1d2330;color:#fff}
header.top a{color:#fff;text-decoration:none}
header.top .brand{font-weight:700;letter-spacing:.02em}
header.top nav{display:flex;gap:1rem;flex:1}
header.top nav a{opacity:.8;padding:.15rem .1rem;border-bottom:2px solid transparent}
header.top nav a.active{opacity:1;border-bottom-color:#8fb4ff}
header.top .count{background:#e0a800;color:#1d2330;border-radius:999px;padding:0 .45em;font-size:.8em;font-weight:700;margin-left:.3em}
header.top form{margin:0}
header.top button{background:transparent;color:#fff;border:1px solid #6b7386;border-radius:4px;padding:.2rem .7rem;cursor:pointer}
main{max-width:1320px;margin:0 auto;padding:1.25rem 1.5rem 3rem}
h1{font-size:1.35rem;margin:.2rem 0 1rem}
h2{font-size:1.1rem;margin:2rem 0 .75rem;padding-bottom:.3rem;border-bottom:1px solid var(--line)}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:.05em .6em;border-radius:999px;font-size:.8rem;font-weight:600;border:1px solid transparent;white-space:nowrap}
.s-succeeded{background:var(--ok-bg);color:var(--ok);border-color:#b7dfc3}
.s-failed{background:var(--bad-bg);color:var(--bad);border-color:#f3c0bd}
.s-unknown{background:var(--warn-bg);color:var(--warn);border-color:#ecc35c}
.s-duplicate_effect_confirmed{background:#b3261e;color:#fff;border-color:#8c1d17}
.s-open{background:var(--info-bg);color:var(--info);border-color:#c4d6f7}
.s-cancelled{background:#eceef1;color:#4b5262;border-color:#d5d9e0}
.a-requested{background:var(--warn-bg);color:var(--warn);border-color:#ecc35c}
.a-approved{background:var(--ok-bg);color:var(--ok);border-color:#b7dfc3}
.a-denied,.a-revoked{background:var(--bad-bg);color:var(--bad);border-color:#f3c0bd}
.a-used,.a-withdrawn,.a-expired{background:#eceef1;color:#4b5262;border-color:#d5d9e0}
.d-response_received{background:var(--ok-bg);color:var(--ok)}
.d-sent_no_response,.d-inflight{background:var(--warn-bg);color:var(--warn)}
.d-not_sent,.d-execution_error{background:var(--bad-bg);color:var(--bad)}
.pills{display:flex;flex-wrap:wrap;gap:.4rem;margin:0 0 1rem;padding:0;list-style:none}
.pills a{display:inline-block;padding:.25rem .7rem;border:1px solid var(--line);border-radius:999px;background:var(--card);text-decoration:none;color:var(--fg);font-size:.9rem}
.pills a.active{border-color:var(--link);box-shadow:inset 0 0 0 1px var(--link);font-weight:600}
.pills a.hot{border-color:#ecc35c}
.pills a.alarm{border-color:#b3261e;color:#b3261e;font-weight:600}
.pills b{margin-left:.35em}
form.search{display:flex;flex-wrap:wrap;gap:.75rem;align-items:flex-end;background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.75rem 1rem;margin-bottom:1rem}
label{display:flex;flex-direction:column;font-size:.8rem;color:var(--muted);gap:.15rem}
input,select,textarea{font:inherit;font-size:.92rem;padding:.3rem .45rem;border:1px solid #b9c0cc;border-radius:4px;background:#fff;color:var(--fg)}
button{font:inherit;font-size:.9rem;padding:.35rem .95rem;border-radius:4px;border:1px solid #9aa3b2;background:#fff;cursor:pointer}
button.primary{background:#1a56b8;border-color:#1a56b8;color:#fff}
button.approve{background:#17603a;border-color:#17603a;color:#fff}
button.deny,button.revoke{background:#fff;border-color:#b3261e;color:#b3261e}
table{width:100%;border-collapse:collapse;background:var(--card);border:1px solid var(--line);border-radius:6px}
th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid var(--line);vertical-align:top;font-size:.9rem}
th{font-size:.78rem;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);background:#fafbfc}
td.num{text-align:right}
td.key{min-width:15rem}
.scroll{overflow-x:auto}
tr.r-unknown td:first-child{box-shadow:inset 4px 0 0 #e0a800}
tr.r-duplicate_effect_confirmed{background:#fff3f2}
tr.r-duplicate_effect_confirmed td:first-child{box-shadow:inset 4px 0 0 #b3261e}
.banner{padding:.7rem 1rem;border-radius:6px;margin:0 0 1rem;border:1px solid;overflow-wrap:anywhere}
.banner.error{background:var(--bad-bg);border-color:#f3c0bd;color:var(--bad)}
.banner.note{background:var(--info-bg);border-color:#c4d6f7;color:var(--info)}
.banner.ok{background:var(--ok-bg);border-color:#b7dfc3;color:var(--ok)}
td.duplicates b{color:var(--ok)}
a.ref{overflow-wrap:anywhere}
.hero{border-radius:8px;padding:1rem 1.25rem;margin:0 0 1rem;border:1px solid}
.hero .state{font-size:2rem;font-weight:800;letter-spacing:.03em;line-height:1.2}
.hero .meaning{margin-top:.2rem}
dl.facts{display:grid;grid-template-columns:11rem 1fr;gap:.3rem 1rem;margin:0;background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.8rem 1rem}
dl.facts dt{color:var(--muted);font-size:.85rem}
dl.facts dd{margin:0}
ol.timeline{list-style:none;margin:0;padding:0;border-left:2px solid var(--line);margin-left:.5rem}
ol.timeline li{position:relative;display:grid;grid-template-columns:15.5rem 1fr;gap:.2rem 1rem;padding:.55rem 0 .55rem 1rem}
ol.timeline li::before{content:"";position:absolute;left:-7px;top:.95rem;width:12px;height:12px;border-radius:50%;background:#9aa3b2;border:2px solid var(--bg)}
ol.timeline li.t-attempt::before{background:#1a56b8}
ol.timeline li.t-decision::before{background:#5c6577}
ol.timeline li.t-observation::before{background:#8a5cc2}
ol.timeline li.t-approval::before{background:#e0a800}
ol.timeline li:target{background:#fffbe6}
ol.timeline time{color:var(--muted);font-size:.85rem;font-family:ui-monospace,"DejaVu Sans Mono",monospace;padding-top:.1rem}
.kind{display:inline-block;min-width:6.5rem;font-size:.75rem;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:700}
.entry p{margin:.1rem 0}
.entry .head{font-weight:500}
.changed{color:#b3261e;font-weight:700}
.same{color:var(--ok);font-weight:600}
.replayed{background:var(--ok-bg);color:var(--ok);padding:0 .3em;border-radius:3px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,34rem),1fr));gap:1rem}
article.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.9rem 1.1rem}
article.card.k-requested{border-color:#ecc35c;box-shadow:inset 4px 0 0 #e0a800}
article.card:target{outline:2px solid #8fb4ff}
article.card header{display:flex;justify-content:space-between;align-items:center;gap:.5rem;margin-bottom:.5rem}
article.card header>span:first-child{min-width:0;overflow-wrap:anywhere}
article.card header>.badge{flex:none}
article.card dl.facts{grid-template-columns:9.5rem 1fr;border:0;padding:0}
form.decide{display:grid;grid-template-columns:1fr 2fr;gap:.5rem .75rem;margin-top:.8rem;padding-top:.8rem;border-top:1px dashed var(--line)}
form.decide .wide{grid-column:1/-1}
form.decide .buttons{grid-column:1/-1;display:flex;gap:.6rem;align-items:center}
.login{max-width:26rem;margin:4rem auto;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1.5rem}
.login form{display:flex;flex-direction:column;gap:.8rem}
.entry,dl.facts dd{min-width:0;overflow-wrap:anywhere}
@media (max-width:900px){
header.top{flex-wrap:wrap;gap:.4rem 1rem;padding:.5rem 1rem}
main{padding:1rem 1rem 2rem}
dl.facts{grid-template-columns:8rem minmax(0,1fr)}
ol.timeline li{grid-template-columns:minmax(0,1fr)}
form.decide{grid-template-columns:minmax(0,1fr)}
input,select,textarea{max-width:100%;min-width:0}
form.search label{flex:1 1 12rem}
}
`;

/** A constant (never store data), inserted as is: entities are not decoded inside <style>. */
const CSS_HTML = unsafeRawHtml(CSS);

const STATE_MARK: Readonly<Partial<Record<OperationState, string>>> = {
  unknown: '⚠ ',
  duplicate_effect_confirmed: '⚠ ',
};

/** An operation state as a coloured badge; the two dangerous states also carry a text marker. */
export function stateBadge(state: OperationState): SafeHtml {
  return html`<span class="badge s-${state}" data-state="${state}">${STATE_MARK[state] ?? ''}${state}</span>`;
}

export function stateMark(state: OperationState): string {
  return STATE_MARK[state] ?? '';
}

export interface Shell {
  readonly title: string;
  /** The CSRF token for the logout form; `null` on pages shown before logging in. */
  readonly csrf: string | null;
  readonly active?: 'operations' | 'approvals' | 'runs';
  /** Open approval requests, for the navigation (`null`: not counted). */
  readonly requested?: number | null;
}

export function page(shell: Shell, body: Fragment): SafeHtml {
  const nav =
    shell.csrf === null
      ? null
      : html`<nav>
      <a href="/ui/operations"${shell.active === 'operations' ? html` class="active"` : ''}>Operations</a>
      <a href="/ui/approvals?state=requested"${shell.active === 'approvals' ? html` class="active"` : ''}>Approvals${
        shell.requested
          ? html`<span class="count" title="open approval requests">${shell.requested}</span>`
          : ''
      }</a>
      <a href="/ui/runs"${shell.active === 'runs' ? html` class="active"` : ''}>Runs</a>
    </nav>
    <form method="post" action="/ui/logout"><input type="hidden" name="csrf" value="${shell.csrf}"><button type="submit">Log out</button></form>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${shell.title} · effectgate</title>
<style>${CSS_HTML}</style>
</head>
<body>
<header class="top"><a class="brand" href="/ui/">effectgate</a>${nav ?? html`<span></span>`}</header>
<main>
${body}
</main>
</body>
</html>
`;
}
