/**
 * One request to a real admin server on loopback with the bearer token, a form body when given
 * (an object, or its url-encoded text as a browser would send it), and the redirect it answers.
 */
import { request as httpRequest } from 'node:http';

export interface AdminReply {
  readonly status: number;
  readonly location: string | undefined;
  readonly text: string;
}

export function adminCall(
  port: number,
  token: string,
  method: string,
  path: string,
  form?: Readonly<Record<string, string>> | string,
): Promise<AdminReply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  const body =
    form === undefined ? undefined : typeof form === 'string' ? form : new URLSearchParams(form).toString();
  if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
