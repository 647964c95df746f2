/** URLs an attacker puts where an image or attachment goes: none may be stored or served back. */
export const unsafeUrls = [
  'javascript:alert(document.domain)',
  'data:text/html,<script>alert(1)</script>',
  'file:///etc/passwd',
  'ftp://files.example.com/a.png',
  'vbscript:msgbox(1)',
  ' javascript:alert(1)',
  'JAVASCRIPT:alert(1)',
];
