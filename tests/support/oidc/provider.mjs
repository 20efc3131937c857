// A real OpenID provider (panva/oidc-provider) for the identity tests, on 127.0.0.1 only.
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {"port": 0 or a port, "keys": [private JWKs, each with kid and alg],
//          "clients": [{"client_id", "client_secret", "alg", "claims": {...}}]}
// Each client gets access tokens (client credentials grant, RFC 8707 resource indicators)
// as JWTs for whatever resource it asks for, signed with the first key of its "alg" (so a
// restart with a new key first in the list is a key rotation), carrying its "claims"
// (groups, roles) beside the standard ones. Prints "listening <port>" when ready.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const clients = new Map(config.clients.map((c) => [c.client_id, c]));

const server = createServer();
await new Promise((resolve) => { server.listen(config.port || 0, '127.0.0.1', resolve); });
const { port } = server.address();

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: 'read write',
  })),
  jwks: { keys: config.keys },
  scopes: ['openid', 'read', 'write'],
  cookies: { keys: ['guaipeca-test-cookie-key'] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => ({
        scope: 'read write',
        audience: resource,
        accessTokenFormat: 'jwt',
        accessTokenTTL: 600,
        jwt: { sign: { alg: clients.get(client.clientId).alg } },
      }),
    },
  },
  extraTokenClaims: (ctx, token) => clients.get(token.clientId)?.claims,
});
server.on('request', provider.callback());
process.stdout.write(`listening ${port}\n`);
