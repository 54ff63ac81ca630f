/**
 * plinth's own templates, used for every kind and locale the app's folder does not cover
 * (docs/emails.md). Written in the same form as the app's files: a first line
 * `Subject: …`, then the body. English.
 */

export const KINDS = [
  'confirmation',
  'recovery',
  'magic_link',
  'email_change',
  'invite',
  'reauthentication',
  'email_changed_notification',
  'password_changed_notification',
] as const;

export type TemplateKind = (typeof KINDS)[number];

/** GoTrue's names, and two of plinth's for the change notice (`OldEmail` is GoTrue's too). */
export const VARIABLES: ReadonlySet<string> = new Set([
  'ConfirmationURL',
  'Token',
  'TokenHash',
  'SiteURL',
  'Email',
  'NewEmail',
  'OldEmail',
  'Data',
  'RedirectTo',
  'SendingTo',
  'EmailChanged',
  'PasswordChanged',
]);

const IGNORE = 'If you did not ask for it, you can ignore this email.';

export const DEFAULTS: Record<TemplateKind, { html: string; txt: string }> = {
  confirmation: {
    html: `Subject: Confirm your email address

<h2>Confirm your email address</h2>
<p>Follow the link below to confirm this email address and finish signing up.</p>
<p><a href="{{ .ConfirmationURL }}">Confirm email address</a></p>
{{ if .Token }}<p>Or enter this code: {{ .Token }}</p>
{{ end }}<p>If you did not sign up, you can ignore this email.</p>
`,
    txt: `Subject: Confirm your email address

Confirm your email address by opening this link:

{{ .ConfirmationURL }}
{{ if .Token }}
Or enter this code: {{ .Token }}
{{ end }}
If you did not sign up, you can ignore this email.
`,
  },
  magic_link: {
    html: `Subject: Your sign-in link

<h2>Your sign-in link</h2>
<p>Follow the link below to sign in.</p>
<p><a href="{{ .ConfirmationURL }}">Sign in</a></p>
{{ if .Token }}<p>Or enter this code: {{ .Token }}</p>
<p>The link and the code are valid for 1 hour and work once. If you did not ask for them, you can ignore this email.</p>
{{ else }}<p>The link is valid for 1 hour and works once. ${IGNORE}</p>
{{ end }}`,
    txt: `Subject: Your sign-in link

Sign in by opening this link:

{{ .ConfirmationURL }}
{{ if .Token }}
Or enter this code: {{ .Token }}

The link and the code are valid for 1 hour and work once. If you did not ask for them, you can ignore this email.
{{ else }}
The link is valid for 1 hour and works once. ${IGNORE}
{{ end }}`,
  },
  recovery: {
    html: `Subject: Reset your password

<h2>Reset your password</h2>
<p>Follow the link below to choose a new password.</p>
<p><a href="{{ .ConfirmationURL }}">Reset password</a></p>
{{ if .Token }}<p>Or enter this code: {{ .Token }}</p>
{{ end }}<p>The link{{ if .Token }} and the code are{{ else }} is{{ end }} valid for 1 hour and work{{ if not .Token }}s{{ end }} once. If you did not ask for it, you can ignore this email; your password stays as it is.</p>
`,
    txt: `Subject: Reset your password

Choose a new password by opening this link:

{{ .ConfirmationURL }}
{{ if .Token }}
Or enter this code: {{ .Token }}
{{ end }}
The link{{ if .Token }} and the code are{{ else }} is{{ end }} valid for 1 hour and work{{ if not .Token }}s{{ end }} once. If you did not ask for it, you can ignore this email; your password stays as it is.
`,
  },
  invite: {
    html: `Subject: You have been invited

<h2>You have been invited</h2>
<p>You have been invited to create an account. Follow the link below to accept.</p>
<p><a href="{{ .ConfirmationURL }}">Accept the invitation</a></p>
<p>The link is valid for 24 hours and works once. If you did not expect it, you can ignore this email.</p>
`,
    txt: `Subject: You have been invited

You have been invited to create an account. Accept the invitation by opening this link:

{{ .ConfirmationURL }}

The link is valid for 24 hours and works once. If you did not expect it, you can ignore this email.
`,
  },
  email_change: {
    html: `Subject: Confirm your new email address

<h2>Confirm your new email address</h2>
<p>Follow the link below to confirm {{ .NewEmail }} as your new email address.</p>
<p><a href="{{ .ConfirmationURL }}">Confirm new email address</a></p>
{{ if .Token }}<p>Or enter this code: {{ .Token }}</p>
{{ end }}<p>If you did not ask for this change, you can ignore this email.</p>
`,
    txt: `Subject: Confirm your new email address

Confirm {{ .NewEmail }} as your new email address by opening this link:

{{ .ConfirmationURL }}
{{ if .Token }}
Or enter this code: {{ .Token }}
{{ end }}
If you did not ask for this change, you can ignore this email.
`,
  },
  reauthentication: {
    html: `Subject: {{ .Token }} is your verification code

<h2>Your verification code</h2>
<p>Use this code to confirm it is you: {{ .Token }}</p>
<p>${IGNORE}</p>
`,
    txt: `Subject: {{ .Token }} is your verification code

Use this code to confirm it is you: {{ .Token }}

${IGNORE}
`,
  },
  email_changed_notification: {
    html: `Subject: The email address of your account was changed

<h2>The email address of your account was changed</h2>
<p>The email address of your account was changed{{ if .NewEmail }} to {{ .NewEmail }}{{ end }}.</p>
{{ if .PasswordChanged }}<p>The password of your account was changed.</p>
{{ end }}<p>Every other session of the account was signed out.</p>
<p>If you made this change, you can ignore this email. If you did not, someone else may have access to your account: contact the application that sent this email.</p>
`,
    txt: `Subject: The email address of your account was changed

The email address of your account was changed{{ if .NewEmail }} to {{ .NewEmail }}{{ end }}.
{{ if .PasswordChanged }}The password of your account was changed.
{{ end }}
Every other session of the account was signed out.

If you made this change, you can ignore this email. If you did not, someone else may have access to your account: contact the application that sent this email.
`,
  },
  password_changed_notification: {
    html: `Subject: The password of your account was changed

<h2>The password of your account was changed</h2>
<p>The password of your account was changed.</p>
<p>Every other session of the account was signed out.</p>
<p>If you made this change, you can ignore this email. If you did not, someone else may have access to your account: contact the application that sent this email.</p>
`,
    txt: `Subject: The password of your account was changed

The password of your account was changed.

Every other session of the account was signed out.

If you made this change, you can ignore this email. If you did not, someone else may have access to your account: contact the application that sent this email.
`,
  },
};
