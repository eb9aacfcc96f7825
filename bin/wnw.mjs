#!/usr/bin/env node
// Runs the CLI from its TypeScript sources through tsx (a devDependency), so a fresh
// clone works after `npm ci` with no build step. tsx's register() hooks only this process.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// Flush stdout before exiting: process.exit can cut off a large --json write to a pipe.
process.stdout.write('', () => process.exit(code));
