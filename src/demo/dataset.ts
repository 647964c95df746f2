/**
 * The demo data set: two people, their agents and what those agents made. Text is written to
 * read like real use, so the demo is worth clicking through and searching.
 */
export const demoUsers = [
  {
    username: 'alice',
    userImage: 'https://cdn.parley.dev/avatars/alice.jpg',
    subscriptionTier: 'pro',
    grants: { subscription: '1000', forever: '250' },
  },
  {
    username: 'bob',
    userImage: 'https://cdn.parley.dev/avatars/bob.jpg',
    subscriptionTier: 'free',
    grants: { subscription: '500', forever: '0' },
  },
] as const;

export type DemoUsername = (typeof demoUsers)[number]['username'];

export const demoAgents = [
  {
    key: 'muse',
    owner: 'alice',
    name: 'Muse',
    description: 'An art director for illustrated zines: proposes palettes, compositions and prompts, then renders them.',
    public: true,
    persona:
      'You are Muse, a warm and opinionated art director. You think in palettes and thumbnails, and you always explain why a composition works.',
    isPersonaPublic: true,
    greeting: 'Hi! Tell me what you are making and who it is for, and I will sketch three directions.',
    knowledge: 'Riso printing limits: two to four spot colours, registration drift of about 1 mm.',
    suggestions: [
      { label: 'Zine cover', prompt: 'Design a cover for a 24-page zine about city gardens.' },
      { label: 'Palette', prompt: 'Suggest a four-colour riso palette for a night-market poster.' },
    ],
    tools: { flux_dev: true, flux_fill: true, image_caption: true, creations_search: true },
    llmSettings: { modelProfile: 'medium', thinkingPolicy: 'auto', thinkingEffortCap: 'medium' },
  },
  {
    key: 'archivist',
    owner: 'alice',
    name: 'Archivist',
    description: 'Keeps track of references, sources and image credits for long projects.',
    public: false,
    persona: 'You are meticulous. You cite every source and never invent a credit.',
    isPersonaPublic: false,
    greeting: 'Send me links or images and I will file them with their credits.',
    knowledge: '',
    suggestions: [],
    tools: { image_caption: true },
    llmSettings: { modelProfile: 'low', thinkingPolicy: 'off' },
  },
  {
    key: 'chef-remy',
    owner: 'bob',
    name: 'Chef Remy',
    description: 'A home-cooking coach who plans weekly menus and narrates recipes out loud.',
    public: true,
    persona: 'You are Remy, a patient cook from Lyon who prefers seasonal vegetables and cheap cuts.',
    isPersonaPublic: true,
    greeting: 'Bonjour! What is in your fridge today?',
    knowledge: 'Pantry staples: lentils, onions, eggs, rice, canned tomatoes.',
    suggestions: [{ label: 'Weekly menu', prompt: 'Plan five dinners for two under 40 euros.' }],
    tools: { kokoro_tts: true, flux_schnell: true },
    llmSettings: { modelProfile: 'low', thinkingPolicy: 'auto', thinkingEffortCap: 'low' },
  },
] as const;

export const demoDeployments = [
  {
    agent: 'muse',
    platform: 'discord',
    config: { channel_allowlist: ['zine-club', 'print-room'] },
    secrets: { bot_token: 'demo-discord-token-not-real' },
  },
  { agent: 'muse', platform: 'telegram', config: { chat_mode: 'mentions_only' }, secrets: { bot_token: 'demo-telegram-token-not-real' } },
  {
    agent: 'archivist',
    platform: 'email',
    config: { reply_from: 'archivist@parley.dev' },
    secrets: { smtp_password: 'demo-smtp-password-not-real' },
  },
] as const;

export const demoTriggers = [
  {
    agent: 'muse',
    name: 'Morning moodboard',
    cron: '0 0 9 * * 1-5',
    timezone: 'Europe/Paris',
    prompt: 'Post three fresh palette ideas to #zine-club.',
    status: 'active',
  },
  {
    agent: 'archivist',
    name: 'Weekly credits digest',
    cron: '0 0 17 * * 5',
    timezone: 'Europe/Paris',
    prompt: 'Summarise the credits filed this week.',
    status: 'paused',
  },
] as const;

export const demoConcept = {
  owner: 'alice',
  agent: 'muse',
  name: 'Neon Greenhouse',
  usageInstructions: 'Glass-house interiors lit by magenta and teal neon; keep plants in the foreground.',
  images: [
    { image: 'https://cdn.parley.dev/concepts/neon-greenhouse-1.jpg', usageInstructions: 'Overall palette reference.' },
    { image: 'https://cdn.parley.dev/concepts/neon-greenhouse-2.jpg', usageInstructions: 'Framing: low angle through the leaves.' },
    { image: 'https://cdn.parley.dev/concepts/neon-greenhouse-3.jpg', usageInstructions: 'Texture of the fogged glass.' },
  ],
} as const;

export const demoModels = [
  { owner: 'alice', name: 'Watercolor Botanicals', baseModel: 'flux-dev', trigger: 'wcbotanic style', public: true },
  { owner: 'alice', name: 'Alice Studio Portraits', baseModel: 'flux-dev', trigger: 'alicestudio person', public: false },
] as const;

const subjects = [
  'a fox reading under a streetlamp',
  'a lighthouse in a thunderstorm',
  'a tiny café on a rooftop garden',
  'an astronaut tending tomatoes',
  'koi fish circling a full moon',
  'a market stall of glass fruit',
  'a tram crossing a foggy bridge',
  'a cat asleep on a stack of zines',
  'an owl librarian sorting scrolls',
  'a greenhouse lit by neon signs',
  'a bicycle covered in ivy',
  'a whale drifting above a city',
  'a paper boat in a rain gutter',
  'a robot watering ferns',
  'a desert observatory at dusk',
  'a bakery window at dawn',
  'a mountain hut in deep snow',
  'jellyfish lanterns over a harbour',
  'a violinist on a subway platform',
  'a garden of origami flowers',
];
const styles = [
  'watercolor',
  'risograph print',
  'isometric pixel art',
  'ukiyo-e woodblock',
  'claymation still',
  'art nouveau poster',
  'charcoal sketch',
  'cinematic photograph',
  'low-poly render',
  'gouache illustration',
  'linocut',
  'vaporwave collage',
];
const moods = ['quiet', 'whimsical', 'melancholic', 'bright', 'mysterious', 'cozy'];
const media = [
  { tool: 'flux_dev', type: 'image', ext: 'png', mime: 'image/png', width: 1024, height: 1024 },
  { tool: 'flux_schnell', type: 'image', ext: 'png', mime: 'image/png', width: 1344, height: 768 },
  { tool: 'flux_fill', type: 'image', ext: 'png', mime: 'image/png', width: 1024, height: 1024 },
  { tool: 'wan_t2v', type: 'video', ext: 'mp4', mime: 'video/mp4', width: 1280, height: 720, duration: 5 },
  { tool: 'wan_i2v', type: 'video', ext: 'mp4', mime: 'video/mp4', width: 720, height: 1280, duration: 4 },
  { tool: 'stable_audio', type: 'audio', ext: 'mp3', mime: 'audio/mpeg', duration: 30 },
  { tool: 'kokoro_tts', type: 'audio', ext: 'mp3', mime: 'audio/mpeg', duration: 12 },
] as const;

export const DEMO_CREATION_COUNT = 240;

/** Creation `n` of the demo: varied owners, tools, visibility and prompts, but the same every run. */
export function demoCreation(n: number) {
  const subject = subjects[n % subjects.length]!;
  const style = styles[Math.floor(n / subjects.length) % styles.length]!;
  const mood = moods[n % moods.length]!;
  const medium = media[n % media.length]!;
  const owner: DemoUsername = n % 3 === 2 ? 'bob' : 'alice';
  const prompt = `${subject}, ${style}, ${mood} mood`;
  const name = `${subject.replace(/^(a|an) /, '').replace(/^\w/, (c) => c.toUpperCase())} (${style})`;
  const width = 'width' in medium ? medium.width : undefined;
  const height = 'height' in medium ? medium.height : undefined;
  return {
    owner,
    agent: n % 4 === 0 ? (owner === 'alice' ? 'muse' : 'chef-remy') : null,
    tool: medium.tool,
    name,
    prompt,
    public: n % 5 !== 4,
    ext: medium.ext,
    mediaAttributes: {
      mimeType: medium.mime,
      ...(width && height ? { width, height, aspectRatio: Number((width / height).toFixed(4)) } : {}),
      ...('duration' in medium ? { duration: medium.duration } : {}),
    },
    args:
      medium.type === 'audio'
        ? { prompt, duration: 'duration' in medium ? medium.duration : 10 }
        : { prompt, n_samples: 1, seed: 1000 + n },
    likeCount: 0,
    createdAt: new Date(Date.UTC(2026, 9, 1) + n * 3_600_000),
  };
}

/**
 * Conversations with a real history. Replies carry the token counts a model would have
 * reported, and the sessions' counters are their sums, as if the replies had been written.
 */
export const demoSessions = [
  {
    owner: 'alice',
    title: 'Planning a botanical zine',
    agents: ['muse'],
    sharedWith: [{ username: 'bob', permission: 'editor' }],
    publicShare: false,
    messages: [
      { role: 'user', from: 'alice', content: 'I want a 24-page zine about the plants growing in abandoned lots. Where do we start?' },
      {
        role: 'assistant',
        from: 'muse',
        content:
          'Start with the spine of the story: pick six plants and give each a spread. I would print on recycled kraft with green and fluorescent pink.',
        usage: [412, 38],
        reactions: [{ from: 'alice', reaction: 'thumbs_up' }],
      },
      { role: 'user', from: 'bob', content: 'Could one spread be about edible weeds? I can write recipes.' },
      {
        role: 'assistant',
        from: 'muse',
        content:
          'Yes: make it the centrefold. Dandelion, purslane and wild garlic read well in two-colour riso, and a recipe per plant gives the spread a reason to be kept.',
        usage: [486, 41],
        reactions: [{ from: 'bob', reaction: '🌱' }],
      },
    ],
  },
  {
    owner: 'alice',
    title: 'Neon greenhouse poster',
    agents: ['muse'],
    sharedWith: [],
    publicShare: true,
    messages: [
      { role: 'user', from: 'alice', content: 'Make me a poster of a greenhouse lit only by neon signs.' },
      {
        role: 'assistant',
        from: 'muse',
        content: 'Here is a first direction: teal glass, magenta signage, monstera leaves framing the bottom third.',
        usage: [388, 26],
        reactions: [],
      },
      { role: 'user', from: 'alice', content: 'Warmer, please. It should feel like a night market, not a lab.' },
      {
        role: 'assistant',
        from: 'muse',
        content: 'Swap the teal for amber and keep one magenta sign as the focal point; steam on the glass will soften every light.',
        usage: [431, 29],
        reactions: [],
      },
    ],
  },
  {
    owner: 'alice',
    title: 'Menu for the zine launch',
    agents: ['muse', 'chef-remy'],
    sharedWith: [],
    publicShare: false,
    messages: [
      {
        role: 'user',
        from: 'alice',
        content:
          'We launch the zine on Friday with 30 guests. Remy, what should we cook, and Muse, how do we make the table look like the zine?',
      },
      {
        role: 'assistant',
        from: 'chef-remy',
        content:
          'Three big dishes that wait well: a lentil salad with roasted carrots, a wild-garlic tart, and rice pudding with rhubarb. All under 90 euros.',
        usage: [522, 34],
        reactions: [{ from: 'alice', reaction: 'thumbs_up' }],
      },
      {
        role: 'assistant',
        from: 'muse',
        content:
          'Kraft paper runners printed with the centrefold plants, and name cards in fluorescent pink so the table matches the cover.',
        usage: [530, 27],
        reactions: [],
      },
    ],
  },
] as const;
