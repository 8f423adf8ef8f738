// The shared environment table (fixtures/environment.json) through the package's public API:
// an agent that leaves apiKey or baseURL out takes them from the provider's usual variables.
// The Python package runs the same table (packages/python/tests/test_environment.py). The
// table's contract is in the file itself.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { Agent } from '../src/index.js'

const table = JSON.parse(
  readFileSync(new URL('../../../fixtures/environment.json', import.meta.url), 'utf8'),
)
const NAMED = [...new Set(table.cases.flatMap((c) => Object.keys(c.env)))]

let server
let loopback
const requests = []

before(async () => {
  server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      requests.push({ url: req.url, headers: req.headers })
      const body = '{"error":{"type":"invalid_request_error","message":"scripted refusal"}}'
      res.writeHead(400, { 'content-type': 'application/json', 'content-length': body.length })
      res.end(body)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  loopback = `http://127.0.0.1:${server.address().port}`
})

after(() => server.close())

/** Whether `text` is in a header value or the URL of `request`. */
function carries(request, text) {
  return request.url.includes(text) || Object.values(request.headers).some((v) => String(v).includes(text))
}

for (const c of table.cases) {
  test(c.name, async () => {
    const saved = { ...process.env }
    try {
      for (const name of NAMED) delete process.env[name]
      for (const [name, value] of Object.entries(c.env)) process.env[name] = value.replace('$LOOPBACK', loopback)
      requests.length = 0
      const config = { name: 'env', model: 'm', provider: c.provider, call: { egress: [loopback] } }
      if (!c.baseURLFromEnvironment) config.baseURL = loopback
      if (c.apiKey !== undefined) config.apiKey = c.apiKey
      const result = await new Agent(config).run('hi').catch((error) => ({ success: false, error }))
      assert.equal(result.success, false, 'the loopback refuses every request')
      assert.equal(requests.length, c.expect.requests, JSON.stringify(requests))
      if (c.expect.sends !== undefined) assert.ok(carries(requests[0], c.expect.sends), JSON.stringify(requests[0]))
      for (const text of c.expect.sendsNot ?? []) {
        for (const request of requests) assert.ok(!carries(request, text), `${text} in ${JSON.stringify(request)}`)
      }
    } finally {
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key]
      Object.assign(process.env, saved)
    }
  })
}
