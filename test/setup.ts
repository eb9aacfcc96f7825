// Runs in every test file before its tests (vite.config.ts, test.setupFiles).
import { afterAll } from 'vitest';
import { removeTempDirs } from './helpers/temp.js';

afterAll(removeTempDirs);
