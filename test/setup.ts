// Runs in every test file before its tests (vite.config.ts, test.setupFiles).
import { afterAll } from 'vitest';
import { removeTempDirs } from './helpers/temp.js';

afterAll(removeTempDirs);
// Tests run in Node and read model folders and audio from disk, as a script that imports wnw/node does.
import '../src/platform/node-host.js';
