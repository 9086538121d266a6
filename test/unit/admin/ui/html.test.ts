/**
 * The pages escape by construction: `html` knows where each interpolation lands (element text,
 * a quoted attribute value, inside a tag, a <textarea>/<title>, a <style>) and text can become
 * markup only as a `SafeHtml` this module made. Whatever reaches a place where escaping cannot
 * protect it is refused at once, never written.
 */
import { describe, expect, it } from 'vitest';
import { formValue, html, join, SafeHtml, unsafeRawHtml } from '../../../../src/admin/ui/html.js';

const HOSTILE = `</textarea></title></style>"'><b onclick=x>&amp;`;
const ESCAPED = '&lt;/textarea&gt;&lt;/title&gt;&lt;/style&gt;&quot;&#39;&gt;&lt;b onclick=x&gt;&amp;amp;';

describe('html: every interpolation escaped for where it lands', () => {
  it('text in element content, a quoted attribute, a <textarea> and a <title> is escaped', () => {
    expect(html`<p>${HOSTILE}</p>`.text).toBe(`<p>${ESCAPED}</p>`);
    expect(html`<p title="${HOSTILE}" data-x='${HOSTILE}'>`.text).toBe(
      `<p title="${ESCAPED}" data-x='${ESCAPED}'>`,
    );
    expect(html`<textarea name="ref">${HOSTILE}</textarea>`.text).toBe(
      `<textarea name="ref">${ESCAPED}</textarea>`,
    );
    expect(html`<TITLE>${HOSTILE}</TITLE>`.text).toBe(`<TITLE>${ESCAPED}</TITLE>`);
  });

  it('markup goes into element content, and into a tag as attributes', () => {
    const bold = html`<b>${'<i>'}</b>`;
    expect(html`<p>${bold}${[bold, 1, null, undefined, false]}</p>`.text).toBe(
      '<p><b>&lt;i&gt;</b><b>&lt;i&gt;</b>1</p>',
    );
    expect(html`<a href="/ui/"${html` class="active"`}${''}${null}>x</a>`.text).toBe(
      '<a href="/ui/" class="active">x</a>',
    );
  });

  it('refuses markup inside a <textarea> or a <title>: it could close the element', () => {
    const closing = html`</textarea><b>x</b>`;
    expect(() => html`<textarea name="ref">${closing}</textarea>`).toThrow(/textarea/);
    expect(() => html`<title>${html`</title><b>`}</title>`).toThrow(/title/);
  });

  it('refuses markup inside an attribute value: it could close the quote', () => {
    expect(() => html`<p title="${html`"><b>x</b>`}">`).toThrow(/attribute/);
    expect(() => html`<p title='${[html`'><b>`]}'>`).toThrow(/attribute/);
  });

  it('refuses text inside a tag or as an unquoted attribute value', () => {
    expect(() => html`<p ${'onclick=alert(1)'}>`).toThrow(/quoted attribute/);
    expect(() => html`<p title=${'x onclick=alert(1)'}>`).toThrow(/quoted attribute/);
    expect(() => html`<p title=a${'b'}>`).toThrow(/quoted attribute/);
    expect(() => html`<${'script'}>`).toThrow(/quoted attribute/);
    expect(() => html`<p class="a" ${7}>`).toThrow(/quoted attribute/);
  });

  it('refuses text in a <style>, a comment or a declaration', () => {
    expect(() => html`<style>${'b{}</style><b>'}</style>`).toThrow(/style/);
    expect(() => html`<!-- ${'--><b>'} -->`).toThrow(/comment/);
    expect(() => html`<!doctype ${'html><b>'}>`).toThrow(/declaration/);
  });

  it('lets a <style> hold only a constant said to be raw, which cannot close it', () => {
    const css = unsafeRawHtml('b{color:red}');
    expect(html`<style>${css}</style>`.text).toBe('<style>b{color:red}</style>');
    expect(() => html`<style>${unsafeRawHtml('b{}</STYLE ><b>')}</style>`).toThrow(/style/);
  });

  it('a link, a form action: a value that starts it must be a path, a fragment or an http(s) URL', () => {
    for (const url of ['/ui/runs/a', '#approval-1', '?x=1', 'https://tracker.example/1', 'HTTP://a.example/'])
      expect(html`<a href="${url}">x</a>`.text).toBe(`<a href="${url}">x</a>`);
    for (const url of [
      'javascript:alert(1)',
      ' javascript:x',
      'data:text/html,x',
      '//evil.example',
      '/\\evil',
    ])
      expect(() => html`<a href="${url}">x</a>`, url).toThrow(/URL/);
    expect(() => html`<form action="${'javascript:x'}">`).toThrow(/URL/);
    expect(() => html`<button formaction="${'vbscript:x'}">`).toThrow(/URL/);
    // Also in attributes built apart and added to a tag.
    expect(html`<a${html` href="${'/ui/x'}" title="${'"'}"`}>x</a>`.text).toBe(
      '<a href="/ui/x" title="&quot;">x</a>',
    );
    expect(() => html` href="${'javascript:x'}"`).toThrow(/URL/);
    expect(() => html` title="${html`<b>`}"`).toThrow(/attribute/);
    expect(() => html` title="${'x'}`).toThrow(/unclosed/);
    expect(() => html`<a href="${formValue('javascript:x')}">x</a>`).toThrow(/URL/);
    expect(() => html`<a href="${['java', 'script:x']}">x</a>`).toThrow(/URL/);
    expect(() => html`<a href="${['/', '/evil.example']}">x</a>`).toThrow(/URL/);
    // Later in the value it is a path segment or a fragment of a URL the template starts.
    expect(html`<a href="/ui/operations/${'javascript:x'}">x</a>`.text).toBe(
      '<a href="/ui/operations/javascript:x">x</a>',
    );
  });

  it('refuses a template that leaves a tag, an attribute or a <textarea> open', () => {
    expect(() => html`<p title="${'x'}`).toThrow(/unclosed/);
    expect(() => html`<p class="a"`).toThrow(/unclosed/);
    expect(() => html`<textarea>`).toThrow(/unclosed/);
    expect(() => html`<!-- x`).toThrow(/unclosed/);
  });
});

describe('SafeHtml: markup only this module makes', () => {
  it('cannot be made from text outside html.ts', () => {
    const Ctor = SafeHtml as unknown as new (...args: unknown[]) => SafeHtml;
    expect(() => new Ctor('<b>x</b>')).toThrow();
    expect(() => new Ctor(Symbol('SafeHtml'), '<b>x</b>')).toThrow();
  });

  it('an object that only looks like one is text', () => {
    const fake = Object.assign(Object.create(SafeHtml.prototype) as object, { text: '<b>x</b>' });
    expect(html`<p>${fake as SafeHtml}</p>`.text).toBe('<p>&lt;b&gt;x&lt;/b&gt;</p>');
    const plain = { text: '<b>x</b>', toString: () => '<b>x</b>' };
    expect(html`<p>${plain as unknown as SafeHtml}</p>`.text).toBe('<p>&lt;b&gt;x&lt;/b&gt;</p>');
  });

  it('a form value is escaped for an attribute, round-trips, and is text anywhere else', () => {
    const v = formValue(`a"b'c<d>&\u200b`);
    expect(html`<input value="${v}">`.text).toBe('<input value="a&quot;b&#39;c&lt;d&gt;&amp;\u200b">');
    expect(html`<p>${v}</p>`.text).toBe('<p>a&quot;b&#39;c&lt;d&gt;&amp;\u200b</p>');
    expect(html`<textarea>${v}</textarea>`.text).toBe(
      '<textarea>a&quot;b&#39;c&lt;d&gt;&amp;\u200b</textarea>',
    );
  });

  it('join escapes text and keeps markup', () => {
    expect(join(['<a>', html`<br>`], ', ').text).toBe('&lt;a&gt;, <br>');
  });
});
