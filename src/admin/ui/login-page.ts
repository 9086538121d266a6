/** The login page (the admin token, never echoed) and the error page. */
import { ADMIN_TOKEN_ENV } from '../admin-auth.js';
import { html, type SafeHtml } from './html.js';
import { page } from './layout.js';

export interface LoginView {
  /** No admin token is configured: the pages are disabled, say how to enable them. */
  readonly unconfigured: boolean;
  readonly error: string | null;
  /** Where to go after logging in (a checked `/ui` path), or `null`. */
  readonly next: string | null;
}

export function renderLoginPage(view: LoginView): SafeHtml {
  const body = view.unconfigured
    ? html`<p class="banner error" role="alert">The admin pages are disabled: no admin token is configured.</p>
<p>Set <code>${ADMIN_TOKEN_ENV}</code> (or pass <code>--admin-token-file</code>) for the gate process and restart it, for example:</p>
<pre class="mono">${ADMIN_TOKEN_ENV}=$(openssl rand -hex 32) effectgate proxy …</pre>
<p class="muted">The same token protects the admin API (<code>Authorization: Bearer …</code>).</p>`
    : html`${view.error === null ? '' : html`<p class="banner error" role="alert">${view.error}</p>`}
<form method="post" action="/ui/login">
  <label>Admin token <input type="password" name="token" required autofocus autocomplete="current-password" spellcheck="false"></label>
  ${view.next === null ? '' : html`<input type="hidden" name="next" value="${view.next}">`}
  <button type="submit" class="primary">Log in</button>
</form>
<p class="muted">The token is the gate's <code>${ADMIN_TOKEN_ENV}</code> (or <code>--admin-token-file</code>). The session cookie holds an HMAC, never the token.</p>`;
  return page(
    { title: 'Log in', csrf: null },
    html`<section class="login"><h1>effectgate admin</h1>
${body}
</section>`,
  );
}

export function renderErrorPage(
  title: string,
  message: string,
  back: string | null,
  csrf: string | null,
): SafeHtml {
  return page(
    { title, csrf },
    html`<h1>${title}</h1>
<p class="banner error" role="alert" id="error-message">${message}</p>
${back === null ? '' : html`<p><a href="${back}">Back</a></p>`}`,
  );
}
