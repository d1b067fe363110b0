// agent-chat-ui's layout asks next/font/google for "Inter", which `next build` fetches from
// fonts.googleapis.com. Offline, Next.js reads the stylesheet from the file named by
// NEXT_FONT_GOOGLE_MOCKED_RESPONSES instead (its own test hook): every URL gets one
// @font-face whose file is Debian's DejaVu Sans (fonts-dejavu-core, which chromium needs).
const FONT = process.env.AGENT_CHAT_UI_FONT || "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const css = `@font-face {
  font-family: 'Inter';
  font-style: normal;
  font-weight: 100 900;
  font-display: swap;
  src: url(${FONT}) format('truetype');
}
`;
module.exports = new Proxy({}, { get: () => css });
