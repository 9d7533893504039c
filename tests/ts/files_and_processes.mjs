// Lantern's files and processes through Kernel's TypeScript SDK, against a running Lantern: KERNEL_BASE_URL,
// KERNEL_API_KEY and LANTERN_SESSION_ID (a live session) come from the environment. Run by
// tests/browsers/live/test_files.py; exits non-zero on the first wrong answer, else prints what it saw as JSON.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';

import Kernel, { toFile } from '@onkernel/sdk';

const client = new Kernel({
  apiKey: process.env.KERNEL_API_KEY,
  baseURL: process.env.KERNEL_BASE_URL,
  maxRetries: 0, // a retry would hide a 5xx
});
const id = process.env.LANTERN_SESSION_ID;
const folder = `/home/kernel/ts-${process.pid}`;

async function bytesOf(response) {
  return Buffer.from(await response.arrayBuffer());
}

async function writeAndRead() {
  const data = randomBytes(300 * 1024);
  await client.browsers.fs.writeFile(id, data, { path: `${folder}/data.bin` });
  const back = await bytesOf(await client.browsers.fs.readFile(id, { path: `${folder}/data.bin` }));
  assert.ok(back.equals(data), 'read_file gives back the bytes write_file wrote');
  return createHash('sha256').update(data).digest('hex');
}

async function upload() {
  const text = `uploaded by the TypeScript SDK ${process.pid}\n`;
  await client.browsers.fs.upload(id, {
    files: [{ file: await toFile(Buffer.from(text), 'note.txt'), dest_path: `${folder}/up/note.txt` }],
  });
  const back = await bytesOf(await client.browsers.fs.readFile(id, { path: `${folder}/up/note.txt` }));
  assert.equal(back.toString(), text);
  const listed = await client.browsers.fs.listFiles(id, { path: `${folder}/up` });
  assert.deepEqual(listed.map((info) => [info.name, info.size_bytes, info.is_dir]), [['note.txt', text.length, false]]);
}

async function exec(digest) {
  const result = await client.browsers.process.exec(id, { command: 'sha256sum', args: [`${folder}/data.bin`] });
  assert.equal(result.exit_code, 0);
  const stdout = Buffer.from(result.stdout_b64, 'base64').toString();
  assert.equal(stdout.split(' ')[0], digest, 'the sandbox reads the file the SDK wrote');
  return result.duration_ms;
}

async function spawnAndStream() {
  const spawned = await client.browsers.process.spawn(id, {
    command: 'sh', args: ['-c', 'echo one; sleep 0.3; echo two >&2; exit 3'],
  });
  assert.ok(spawned.process_id && spawned.pid > 0);
  const seen = { stdout: '', stderr: '' };
  let exit = null;
  const stream = await client.browsers.process.stdoutStream(spawned.process_id, { id });
  for await (const event of stream) {
    if (event.event === 'exit') {
      exit = event.exit_code;
    } else {
      seen[event.stream] += Buffer.from(event.data_b64, 'base64').toString();
    }
  }
  assert.deepEqual(seen, { stdout: 'one\n', stderr: 'two\n' });
  assert.equal(exit, 3);
  const status = await client.browsers.process.status(spawned.process_id, { id });
  assert.deepEqual([status.state, status.exit_code], ['exited', 3]);
  return seen;
}

const digest = await writeAndRead();
await upload();
const durationMs = await exec(digest);
const streamed = await spawnAndStream();
console.log(JSON.stringify({ folder, digest, duration_ms: durationMs, streamed }));
