import { defineConfig } from '@playwright/test';

/**
 * Browser tests run in the system Chromium (Debian's `chromium`, which ships SwiftShader),
 * because browsers cannot be downloaded here. WNW_CHROMIUM overrides the path.
 * SwiftShader is a CPU implementation of Vulkan: these tests check correctness, not speed.
 */
export const chromiumArgs = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

// WNW_E2E_PORT lets two runs (or a run and a dev server) coexist.
const port = Number(process.env.WNW_E2E_PORT ?? 5199);

export default defineConfig({
  testDir: 'e2e',
  testMatch: '**/*.spec.ts',
  timeout: 600_000,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: { executablePath: process.env.WNW_CHROMIUM ?? '/usr/bin/chromium', args: chromiumArgs },
  },
  webServer: {
    command: `npx vite --port ${port} --strictPort`,
    url: `http://127.0.0.1:${port}/e2e/harness/ping.html`,
    reuseExistingServer: !process.env.CI,
    timeout: 120_000,
  },
});
